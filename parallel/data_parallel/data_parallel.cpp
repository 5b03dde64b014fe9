#include "parallel/data_parallel/data_parallel.h"

#include <cmath>
#include <optional>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/memory.h"
#include "optim/clip.h"
#include "optim/sgd.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/data_parallel/gradient_buckets.h"
#include "parallel/data_parallel/sharded_io.h"
#include "parallel/data_parallel/zero.h"

namespace shardlab::parallel {
namespace {

// The parameter an optimizer state tensor belongs to: "m/blocks.0.attn.wo.weight" -> its name.
std::string param_of_state(const std::string& state) { return state.substr(state.find('/') + 1); }

// Stage 0 (DP): parameters, gradients and optimizer state whole on every rank; gradients
// all-reduced in buckets, then averaged back into each parameter's .grad, so that any
// optimizer (AdamW, SGD) steps on them as in one process. Dense parameters reduce over
// every batch rank; under expert parallelism the experts reduce over the ranks holding
// the same experts, and are averaged by the same count, since each expert's gradient
// already sums over the expert axis's tokens (the all_to_all's backward brought them).
class DistributedDataParallel : public DataParallel {
 public:
  DistributedDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config);
  void begin_microbatch(int index, int count) override {
    if (buckets_) buckets_->set_sync(index == count - 1);
  }
  void finish_gradients() override;
  double clip_grad_norm(double max_norm) override;
  void step(float lr) override { optimizer_->step(lr); }
  void zero_grad() override;
  void save(CheckpointWriter* writer) override;
  void load(const CheckpointReader& reader) override;
  int64_t optimizer_step() const override { return optimizer_->step_count(); }
  std::string describe() const override;

 private:
  DataAxes axes_;
  std::vector<nn::Parameter> params_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  // None on one batch rank: nothing to exchange, the gradients stay where backward put them.
  std::optional<GradientBuckets> buckets_;
  ParamIO io_;
};

DistributedDataParallel::DistributedDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c)
    : axes_(DataAxes::of(mesh)), params_(model.parameters()), io_(c.model_shards) {
  if (axes_.all->size() > 1) {
    buckets_.emplace(split_gradient_groups(params_, c.expert_parameters, *axes_.all, *axes_.expert_data), c.bucket_mb,
                     1, GradientBuckets::kAllReduce, c.overlap, MemoryCategory::Gradients);
  }
  std::vector<std::pair<std::string, Tensor>> named;
  for (const nn::Parameter& p : params_) named.emplace_back(p.name, *p.tensor);
  if (c.optimizer == "sgd") optimizer_ = std::make_unique<optim::SGD>(named, optim::SGDOptions{.momentum = c.momentum});
  else optimizer_ = std::make_unique<optim::AdamW>(named, c.adamw);
}

void DistributedDataParallel::finish_gradients() {
  if (!buckets_) return;
  add_exposed_seconds(buckets_->finish());
  const float mean = 1.0f / static_cast<float>(axes_.all->size());
  for (auto& b : buckets_->buckets()) {
    b->layout.unpack_grads(b->flat.span(), mean);
    b->flat = Tensor();
  }
}

double DistributedDataParallel::clip_grad_norm(double max_norm) {
  std::vector<optim::GradSpan> grads;
  for (const nn::Parameter& p : params_) {
    Tensor g = p.tensor->grad();
    if (g.defined()) io_.add_grad_spans(grads, p.name, g.span());
  }
  return optim::clip_grad_norm(grads, max_norm, [&](double local) {
    double global = 0.0;
    blocking([&] { global = io_.reduce_norm(local, nullptr); });
    return global;
  });
}

void DistributedDataParallel::zero_grad() {
  if (buckets_) return buckets_->zero_grad();
  for (const nn::Parameter& p : params_) p.tensor->zero_grad();
}

void DistributedDataParallel::save(CheckpointWriter* writer) {
  if (axes_.expert_data->rank() != 0) return;  // every expert rank holds experts of its own
  for (const nn::Parameter& p : params_) io_.write(writer, "params/" + p.name, p.name, p.tensor->shape(), p.tensor->span());
  for (const auto& [name, t] : optimizer_->state_tensors()) {
    io_.write(writer, "optim/" + name, param_of_state(name), t.shape(), t.span());
  }
}

void DistributedDataParallel::load(const CheckpointReader& reader) {
  for (const nn::Parameter& p : params_) io_.read(reader, "params/" + p.name, p.name, p.tensor->shape(), p.tensor->span());
  for (const auto& [name, t] : optimizer_->state_tensors()) {
    Tensor dst = t;
    io_.read(reader, "optim/" + name, param_of_state(name), dst.shape(), dst.span());
  }
  optimizer_->set_step_count(reader.int_attribute("optimizer_step"));
}

std::string DistributedDataParallel::describe() const {
  std::string s = "DP over " + axes_.all->name() + " (" + std::to_string(axes_.all->size()) + " ranks), " +
                  std::to_string(buckets_ ? buckets_->buckets().size() : 0) + " gradient buckets";
  if (axes_.expert_data != axes_.all) s += " (experts' over " + axes_.expert_data->name() + ")";
  return s;
}

// What DistributedDataParallel issues in one step: the bucket all-reduces of the last
// microbatch, in bucket order.
StepPlan plan_distributed(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c) {
  const DataAxes axes = DataAxes::of(mesh);
  StepPlan plan;
  if (axes.all->size() == 1) return plan;
  const auto groups = split_gradient_groups(model.parameters(), c.expert_parameters, *axes.all, *axes.expert_data);
  const std::vector<BucketLayout> buckets = gradient_buckets(groups, c.bucket_mb, 1);
  for (size_t i = 0; i < buckets.size(); ++i) {
    add_planned(plan, mesh, {groups[buckets[i].group].group->name(), CollectiveOp::kAllReduce,
                             buckets[i].layout.padded() * kBytesPerFloat, "grads bucket " + std::to_string(i)});
  }
  return plan;
}

}  // namespace

DataAxes DataAxes::of(const Mesh& mesh) {
  DataAxes a;
  std::vector<std::string> names;
  for (const char* n : {"data", "fsdp"}) {
    if (mesh.has_axis(n)) names.push_back(n);
  }
  if (names.empty()) throw UserError("the mesh " + mesh.describe() + " has no data or fsdp axis; add data=1");
  a.expert_data = &mesh.group(names);
  if (mesh.has_axis("expert") && mesh.axis_size("expert") > 1) names.push_back("expert");
  a.all = &mesh.group(names);
  const bool hybrid = mesh.has_axis("fsdp") && mesh.axis_size("fsdp") > 1 && mesh.has_axis("data");
  a.shard = hybrid ? &mesh.axis("fsdp") : a.expert_data;
  a.replica = hybrid && mesh.axis_size("data") > 1 ? &mesh.axis("data") : nullptr;
  std::vector<std::string> dense_replica;
  if (a.replica) dense_replica.push_back("data");
  if (a.all != a.expert_data) dense_replica.push_back("expert");
  a.dense_replica = dense_replica.empty() ? nullptr : &mesh.group(dense_replica);
  return a;
}

std::unique_ptr<DataParallel> make_bucketed_data_parallel(nn::Transformer& model, const Mesh& mesh,
                                                          const DataParallelConfig& config) {
  SL_ASSERT(config.zero >= 0 && config.zero <= 2, "bucketed data parallelism covers ZeRO stages 0-2");
  nn::initialize_unallocated(model, config.seed);  // deferred: every rank holds the whole model
  if (config.zero == 0) return std::make_unique<DistributedDataParallel>(model, mesh, config);
  return make_zero_data_parallel(model, mesh, config);
}

StepPlan plan_bucketed_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c) {
  return c.zero == 0 ? plan_distributed(model, mesh, c) : plan_zero_step(model, mesh, c);
}

}  // namespace shardlab::parallel
