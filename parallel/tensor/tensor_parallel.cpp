#include "parallel/tensor/tensor_parallel.h"

#include <algorithm>
#include <cstring>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/memory.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/diff_collectives.h"
#include "parallel/tensor/vocab_parallel.h"

namespace shardlab::parallel {
namespace {

// forward: identity; backward: sums the gradient of the K and V rows of a local wqkv
// weight [(n_q + 2) * H, D] over the tensor ranks that share its one kv head (kv0 of K).
Tensor share_kv_gradients(const AxisGroup& tensor, const Tensor& w, int64_t n_q_rows, int64_t kv0, int64_t K) {
  Tensor y = w.detach();
  return record(y, "share_kv_gradients(" + tensor.name() + ")", {w}, [&tensor, n_q_rows, kv0, K](const Tensor& gy) {
    const int64_t D = gy.dim(1), kv_rows = (gy.dim(0) - n_q_rows) / 2, part = kv_rows * D;
    Tensor gx = gy.clone();
    std::vector<float> slots(2 * K * part, 0.0f);  // [K or V][kv head][rows, D]
    for (int64_t i = 0; i < 2; ++i) {
      std::memcpy(slots.data() + (i * K + kv0) * part, gx.data() + (n_q_rows + i * kv_rows) * D, part * sizeof(float));
    }
    all_reduce(tensor, slots);
    for (int64_t i = 0; i < 2; ++i) {
      std::memcpy(gx.data() + (n_q_rows + i * kv_rows) * D, slots.data() + (i * K + kv0) * part, part * sizeof(float));
    }
    return std::vector<Tensor>{gx};
  });
}

// The kv heads rank `rank` of t keeps: K/t of them when t divides K, else the one its
// query heads use (K divides t).
std::pair<int64_t, int64_t> kv_heads_of(const nn::ModelConfig& c, int t, int rank) {
  const int64_t N = c.n_heads, K = c.n_kv_heads;
  if (K % t == 0) return {rank * (K / t), K / t};
  return {rank * (N / t) / (N / K), 1};
}

}  // namespace

Shape TensorShard::local() const {
  Shape s = global;
  s[dim] = 0;
  for (const auto& [begin, end] : ranges) s[dim] += end - begin;
  return s;
}

std::map<std::string, TensorShard> tensor_shards(const nn::ModelConfig& c, int t, int rank) {
  std::map<std::string, TensorShard> shards;
  if (t == 1) return shards;
  const int64_t N = c.n_heads, K = c.n_kv_heads, H = c.head_dim(), D = c.d_model, F = c.d_ff, V = c.vocab;
  const auto [kv0, kvn] = kv_heads_of(c, t, rank);
  const int64_t q0 = rank * (N / t) * H, qn = (N / t) * H;
  const std::vector<std::pair<int64_t, int64_t>> qkv = {
      {q0, q0 + qn}, {N * H + kv0 * H, N * H + (kv0 + kvn) * H}, {(N + K) * H + kv0 * H, (N + K) * H + (kv0 + kvn) * H}};
  const auto rows = [&](int64_t n) { return std::vector<std::pair<int64_t, int64_t>>{{rank * n / t, (rank + 1) * n / t}}; };
  const bool gpt = c.arch == nn::Arch::Gpt;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    shards[b + "attn.wqkv.weight"] = {{(N + 2 * K) * H, D}, 0, qkv};
    if (gpt) shards[b + "attn.wqkv.bias"] = {{(N + 2 * K) * H}, 0, qkv};
    shards[b + "attn.wo.weight"] = {{D, N * H}, 1, {{q0, q0 + qn}}};
    if (gpt) {
      shards[b + "mlp.fc.weight"] = {{F, D}, 0, rows(F)};
      shards[b + "mlp.fc.bias"] = {{F}, 0, rows(F)};
      shards[b + "mlp.fc2.weight"] = {{D, F}, 1, rows(F)};
    } else {
      shards[b + "mlp.gate.weight"] = {{F, D}, 0, rows(F)};
      shards[b + "mlp.up.weight"] = {{F, D}, 0, rows(F)};
      shards[b + "mlp.down.weight"] = {{D, F}, 1, rows(F)};
    }
  }
  shards["wte.weight"] = {{V, D}, 0, rows(V)};
  if (!gpt) shards["lm_head.weight"] = {{V, D}, 0, rows(V)};
  return shards;
}

TensorParallel::TensorParallel(nn::Transformer& model, const AxisGroup& tensor)
    : tensor_(tensor), kv_share_(std::max<int64_t>(1, tensor.size() / model.config.n_kv_heads)) {
  for (const nn::Parameter& p : model.parameters()) global_shapes_[p.name] = p.tensor->shape();
  for (int r = 0; r < tensor.size(); ++r) shards_.push_back(tensor_shards(model.config, tensor.size(), r));
}

std::vector<std::pair<int64_t, int64_t>> TensorParallel::norm_ranges(const std::string& name) const {
  const auto it = shards_[tensor_.rank()].find(name);
  if (it == shards_[tensor_.rank()].end()) {  // replicated: the first rank counts it
    if (tensor_.rank() != 0) return {};
    int64_t n = 1;
    for (int64_t d : global_shapes_.at(name)) n *= d;
    return {{0, n}};
  }
  const TensorShard& s = it->second;
  int64_t n = 1;
  for (int64_t d : s.local()) n *= d;
  // Shared kv heads (wqkv's K and V rows, after the query rows): the first sharer counts them.
  if (kv_share_ > 1 && s.ranges.size() == 3 && tensor_.rank() % kv_share_ != 0) {
    return {{0, n * (s.ranges[0].second - s.ranges[0].first) / s.local()[0]}};
  }
  return {{0, n}};
}

void TensorParallel::write(CheckpointWriter* writer, const std::string& key, const std::string& param,
                           std::span<const float> data) const {
  const Shape& shape = global_shapes_.at(param);
  if (replicated(param)) {
    if (writer) writer->write(key, shape, data);
    return;
  }
  // Every rank's shard has the same size, so one all_gather brings them all.
  const int64_t n = static_cast<int64_t>(data.size());
  MemoryScope scope(MemoryCategory::Communication);
  Tensor parts = Tensor::empty({tensor_.size() * n});
  all_gather(tensor_, data, parts.span());
  if (!writer) return;
  Tensor global = Tensor::empty(shape);
  for (int r = 0; r < tensor_.size(); ++r) {
    shards_[r].at(param).for_each_run([&](int64_t lo, int64_t go, int64_t count) {
      std::memcpy(global.data() + go, parts.data() + r * n + lo, count * sizeof(float));
    });
  }
  writer->write(key, shape, global.span());
}

void TensorParallel::read(const CheckpointReader& reader, const std::string& key, const std::string& param,
                          std::span<float> out) const {
  const Shape& shape = global_shapes_.at(param);
  if (replicated(param)) return reader.read(key, shape, out);
  MemoryScope scope(MemoryCategory::Communication);
  Tensor global = Tensor::empty(shape);
  reader.read(key, shape, global.span());
  shards_[tensor_.rank()].at(param).for_each_run([&](int64_t lo, int64_t go, int64_t count) {
    std::memcpy(out.data() + lo, global.data() + go, count * sizeof(float));
  });
}

namespace {

// Replaces p's tensor by this rank's shard, cut from its values or filled from the
// initialisers at the global element indices.
void shard_parameter(const nn::Parameter& p, const TensorShard& shard, uint64_t seed) {
  SL_ASSERT(p.tensor->shape() == shard.global, "tensor shard of " + p.name + " expects shape " +
                                                   shape_str(shard.global) + ", got " + shape_str(p.tensor->shape()));
  Tensor local;
  {
    MemoryScope scope(MemoryCategory::Parameters);
    local = Tensor::zeros(shard.local());
  }
  const bool allocated = p.tensor->has_storage();
  shard.for_each_run([&](int64_t lo, int64_t go, int64_t count) {
    if (allocated) std::memcpy(local.data() + lo, p.tensor->data() + go, count * sizeof(float));
    else nn::initialize_range(p, seed, go, go + count, local.data() + lo);
  });
  local.set_requires_grad(true);
  *p.tensor = local;
}

}  // namespace

std::unique_ptr<TensorParallel> apply_tensor_parallel(nn::Transformer& model, const AxisGroup& tensor, uint64_t seed) {
  auto result = std::make_unique<TensorParallel>(model, tensor);
  const int t = tensor.size();
  if (t == 1) return result;
  const int rank = tensor.rank();
  const nn::ModelConfig& c = model.config;
  const std::map<std::string, TensorShard> shards = tensor_shards(c, t, rank);
  for (const nn::Parameter& p : model.parameters()) {
    const auto it = shards.find(p.name);
    if (it != shards.end()) shard_parameter(p, it->second, seed);
  }

  // forward: identity; backward: all_reduce over tensor (Megatron f)
  const auto f = [&tensor](const Tensor& x) { return copy_to_group(tensor, x); };
  // forward: all_reduce over tensor; backward: identity (Megatron g)
  const auto g = [&tensor](const Tensor& x) { return reduce_from_group(tensor, x); };
  for (auto& block : model.blocks) {
    block->attn.n_heads = c.n_heads / t;
    block->attn.n_kv_heads = kv_heads_of(c, t, rank).second;
    if (c.n_kv_heads < t) {
      SL_ASSERT(!block->attn.wqkv.bias.defined(), "shared kv heads are a LLaMA (bias-free) case");
      const int64_t q_rows = c.n_heads / t * c.head_dim(), kv0 = kv_heads_of(c, t, rank).first, K = c.n_kv_heads;
      block->attn.wqkv.weight_hook = [&tensor, q_rows, kv0, K](const Tensor& w) {
        return share_kv_gradients(tensor, w, q_rows, kv0, K);
      };
    }
    block->attn.add_forward_pre_hook(f);
    block->attn.wo.reduce_partial = g;
    if (block->mlp) {
      block->mlp->add_forward_pre_hook(f);
      block->mlp->fc2.reduce_partial = g;
    } else {
      block->swiglu->add_forward_pre_hook(f);
      block->swiglu->down.reduce_partial = g;
    }
  }
  const int64_t first = rank * c.vocab / t;
  model.wte.first_row = first;
  model.wte.add_forward_hook(g);
  model.norm_f.add_forward_hook(f);
  model.loss_function = [&tensor, first](const Tensor& logits, std::span<const int32_t> targets, double denominator) {
    return vocab_parallel_cross_entropy(tensor, logits, targets, first, denominator);
  };
  model.logits_hook = [&tensor](const Tensor& logits) { return gather_vocab(tensor, logits); };
  return result;
}

void plan_tensor_parallel_step(StepPlan& plan, const Mesh& mesh, const nn::ModelConfig& c, int64_t rows,
                               int64_t seq_len, int microbatches) {
  const std::string tp = "tensor";
  if (!mesh.has_axis(tp) || mesh.axis_size(tp) == 1) return;
  const int t = mesh.axis_size(tp);
  const int64_t activations = rows * seq_len * c.d_model * kBytesPerFloat, tokens = rows * seq_len;
  const auto reduce = [&](int64_t bytes, const std::string& what) {
    add_planned(plan, mesh, {tp, CollectiveOp::kAllReduce, bytes, what});
  };
  const auto block_forward = [&](int64_t l) {
    reduce(activations, "attention output, block " + std::to_string(l));
    reduce(activations, "MLP output, block " + std::to_string(l));
  };
  for (int m = 0; m < microbatches; ++m) {
    reduce(activations, "embedding");
    for (int64_t l = 0; l < c.n_layers; ++l) block_forward(l);
    add_planned(plan, mesh, {tp, CollectiveOp::kAllGather, t * tokens * kBytesPerFloat, "loss row maxima"});
    reduce(2 * tokens * kBytesPerFloat, "loss sums and target logits");
    reduce(activations, "head input gradient");
    for (int64_t l = c.n_layers - 1; l >= 0; --l) {
      if (c.remat != nn::Remat::None) block_forward(l);  // the recomputed forward reduces again
      reduce(activations, "MLP input gradient, block " + std::to_string(l));
      if (c.n_kv_heads < t) {
        reduce(2 * c.n_kv_heads * c.head_dim() * c.d_model * kBytesPerFloat, "shared kv head gradients, block " +
                                                                              std::to_string(l));
      }
      reduce(activations, "attention input gradient, block " + std::to_string(l));
    }
  }
}

}  // namespace shardlab::parallel
