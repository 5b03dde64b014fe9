#include "parallel/expert/expert_parallel.h"

#include "framework/error.h"
#include "framework/ops.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/diff_collectives.h"

namespace shardlab::parallel {
namespace {

// The dispatch buffer [E, n, D] to its experts' ranks and the outputs back (header comment).
Tensor exchange_over(const AxisGroup& expert, const Tensor& buffer, const std::function<Tensor(const Tensor&)>& run,
                     DType wire) {
  const int64_t ep = expert.size(), E = buffer.dim(0), n = buffer.dim(1), D = buffer.dim(2), G = E / ep;
  // Rows of the experts of rank j are block j of [E*n, D]: block i of what arrives came from rank i.
  Tensor received = exchange_in_group(expert, ops::reshape(buffer, {E * n, D}), Algorithm::kAuto, wire);  // [ep, G, n, D]
  Tensor mine = ops::reshape(ops::transpose(ops::reshape(received, {ep, G, n * D}), 0, 1), {G, ep * n, D});
  Tensor out = run(mine);
  Tensor back = ops::transpose(ops::reshape(out, {G, ep, n * D}), 0, 1);  // [ep, G, n*D]: block j back to rank j
  return ops::reshape(exchange_in_group(expert, ops::reshape(back, {E * n, D}), Algorithm::kAuto, wire), {E, n, D});
}

}  // namespace

std::map<std::string, TensorShard> expert_shards(nn::Transformer& model, int ep, int rank) {
  std::map<std::string, TensorShard> shards;
  if (ep == 1) return shards;
  const int64_t per_rank = model.config.experts / ep;
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    if (!model.blocks[l]->moe) continue;
    for (const nn::Parameter& p : model.blocks[l]->moe->parameters()) {
      if (p.name.rfind("router.", 0) == 0) continue;  // every rank routes its own tokens
      shards["blocks." + std::to_string(l) + ".moe." + p.name] = {p.tensor->shape(), 0,
                                                                   {{rank * per_rank, (rank + 1) * per_rank}}};
    }
  }
  return shards;
}

ExpertParallel::ExpertParallel(nn::Transformer& model, const AxisGroup& expert)
    : AxisShards(expert, model, [&](int rank) { return expert_shards(model, expert.size(), rank); }) {
  for (const auto& [name, shard] : expert_shards(model, expert.size(), expert.rank())) names_.insert(name);
}

std::set<std::string> ExpertParallel::expert_parameters() const { return names_; }

std::unique_ptr<ExpertParallel> apply_expert_parallel(nn::Transformer& model, const AxisGroup& expert, uint64_t seed,
                                                      DType wire) {
  SL_ASSERT(model.config.experts % expert.size() == 0, "Layout::validate checks that the expert axis divides E");
  auto result = std::make_unique<ExpertParallel>(model, expert);
  const auto shards = expert_shards(model, expert.size(), expert.rank());
  for (const nn::Parameter& p : model.parameters()) {
    const auto it = shards.find(p.name);
    if (it != shards.end()) shard_parameter(p, it->second, seed);
  }
  for (auto& block : model.blocks) {
    if (!block->moe) continue;
    block->moe->expert_parallel.exchange = [&expert, wire](const Tensor& buffer,
                                                           const std::function<Tensor(const Tensor&)>& run) {
      return exchange_over(expert, buffer, run, wire);
    };
    if (model.config.capacity_factor == 0.0f) {  // dropless: one buffer shape for the group
      block->moe->expert_parallel.agree_capacity = [&expert](int64_t needed) {
        float slots = static_cast<float>(needed);  // exact: at most a sequence's length
        all_reduce(expert, {&slots, 1}, ReduceOp::kMax);
        return static_cast<int64_t>(slots);
      };
    }
  }
  return result;
}

int64_t expert_all_to_all_bytes(const nn::ModelConfig& c, int64_t rows, int64_t seq_len, DType wire) {
  return wire_bytes(wire, c.experts * rows * nn::expert_capacity(c, seq_len) * c.d_model);
}

void plan_expert_parallel_step(StepPlan& plan, const Mesh& mesh, const nn::ModelConfig& c,
                               const std::vector<int64_t>& layers, int64_t rows, int64_t seq_len, int microbatches,
                               DType wire) {
  if (!mesh.splits(kExpertAxis) || c.experts == 0) return;
  const int64_t bytes = expert_all_to_all_bytes(c, rows, seq_len, wire);
  const auto add = [&](const std::string& what) { add_planned(plan, mesh, {kExpertAxis, CollectiveOp::kAllToAll, bytes, what}); };
  const bool dropless = c.capacity_factor == 0.0f;
  const auto forward = [&](const std::string& b) {
    if (dropless) add_planned(plan, mesh, {kExpertAxis, CollectiveOp::kAllReduce, kBytesPerFloat, "dropless capacity" + b});
    add("dispatch" + b);
    add("combine" + b);
  };
  for (int m = 0; m < microbatches; ++m) {
    for (int64_t l : layers) forward(", block " + std::to_string(l));
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      const std::string b = ", block " + std::to_string(*it);
      if (c.remat != nn::Remat::None) forward(b);  // the recomputed forward exchanges again
      add("combine gradient" + b);
      add("dispatch gradient" + b);
    }
  }
}

}  // namespace shardlab::parallel
