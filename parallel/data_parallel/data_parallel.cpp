#include "parallel/data_parallel/data_parallel.h"

#include <optional>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/memory.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/data_parallel/gradient_buckets.h"
#include "parallel/data_parallel/sharded_io.h"

namespace shardlab::parallel {
namespace {

// Stage 0 (data_parallel.h). Dense parameters reduce over every batch rank; under expert
// parallelism the experts reduce over the ranks holding the same experts, and are
// averaged by the same count, since each expert's gradient already sums over the expert
// axis's tokens (the all_to_all's backward brought them).
class DistributedDataParallel : public GradientSync {
 public:
  DistributedDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                          const ModelSplit& split);
  void set_sync(bool sync) override {
    if (buckets_) buckets_->set_sync(sync);
  }
  void finish_gradients() override;
  optim::ParamViews local_parameters() override;
  const AxisGroup* gradient_shard_group() const override { return nullptr; }  // replicated
  void zero_grad() override;
  void save(CheckpointSink* writer, const optim::Optimizer& optimizer) override;
  void load(const CheckpointReader& reader, const optim::Optimizer& optimizer) override;
  std::string describe() const override;

 private:
  DataAxes axes_;
  std::vector<nn::Parameter> params_;
  FlatLayout whole_;  // every parameter end to end: where checkpoint I/O places the optimizer state
  // None on one batch rank: nothing to exchange, the gradients stay where backward put them.
  std::optional<GradientBuckets> buckets_;
  ParamIO io_;
};

std::vector<FlatLayout::Param> flat_params(const std::vector<nn::Parameter>& params) {
  std::vector<FlatLayout::Param> out;
  for (const nn::Parameter& p : params) out.push_back({p.name, *p.tensor, p.decay});
  return out;
}

DistributedDataParallel::DistributedDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c,
                                                 const ModelSplit& split)
    : axes_(DataAxes::of(mesh)), params_(model.parameters()), whole_(flat_params(params_), 1), io_(split.shards) {
  if (axes_.all->size() > 1) {
    buckets_.emplace(split_gradient_groups(params_, split.expert_parameters, *axes_.all, *axes_.expert_data), c.bucket_mb,
                     1, GradientBuckets::kAllReduce, c.overlap, MemoryCategory::Gradients, c.reduce_dtype);
  }
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

optim::ParamViews DistributedDataParallel::local_parameters() {
  optim::ParamViews views;
  for (const nn::Parameter& p : params_) {
    Tensor g = p.tensor->grad();
    io_.add_views(views, p.name, p.tensor->span(), g.defined() ? g.span() : std::span<float>{}, 0, p.decay);
  }
  return views;
}

void DistributedDataParallel::zero_grad() {
  if (buckets_) return buckets_->zero_grad();
  for (const nn::Parameter& p : params_) p.tensor->zero_grad();
}

void DistributedDataParallel::save(CheckpointSink* writer, const optim::Optimizer& optimizer) {
  if (axes_.expert_data->rank() != 0) return;  // every expert rank holds experts of its own
  for (const nn::Parameter& p : params_) io_.write(writer, "params/" + p.name, p.name, p.tensor->shape(), p.tensor->span());
  MemoryScope scope(MemoryCategory::Communication);
  Tensor flat = Tensor::empty({whole_.padded()});
  for (const std::string& kind : optimizer.state_kinds()) {
    pack_state(optimizer, kind, whole_, 0, flat.span());
    for (const FlatEntry& e : whole_.entries()) {
      io_.write(writer, "optim/" + kind + "/" + e.name, e.name, e.param.shape(), flat.span().subspan(e.offset, e.numel));
    }
  }
}

void DistributedDataParallel::load(const CheckpointReader& reader, const optim::Optimizer& optimizer) {
  for (const nn::Parameter& p : params_) io_.read(reader, "params/" + p.name, p.name, p.tensor->shape(), p.tensor->span());
  MemoryScope scope(MemoryCategory::Communication);
  Tensor flat = Tensor::zeros({whole_.padded()});
  for (const std::string& kind : optimizer.state_kinds()) {
    for (const FlatEntry& e : whole_.entries()) {
      io_.read(reader, "optim/" + kind + "/" + e.name, e.name, e.param.shape(), flat.span().subspan(e.offset, e.numel));
    }
    unpack_state(optimizer, kind, whole_, 0, flat.span());
  }
}

std::string DistributedDataParallel::describe() const {
  std::string s = "DP over " + axes_.all->name() + " (" + std::to_string(axes_.all->size()) + " ranks), " +
                  std::to_string(buckets_ ? buckets_->buckets().size() : 0) + " gradient buckets";
  if (axes_.expert_data != axes_.all) s += " (experts' over " + axes_.expert_data->name() + ")";
  return s;
}

}  // namespace

std::unique_ptr<GradientSync> make_distributed_data_parallel(nn::Transformer& model, const Mesh& mesh,
                                                             const DataParallelConfig& config, const ModelSplit& split) {
  nn::initialize_unallocated(model, config.seed);  // deferred: every rank holds the whole model
  return std::make_unique<DistributedDataParallel>(model, mesh, config, split);
}

// Backward fills the buckets in order; the last bucket's reduction has nothing left to
// hide behind.
StepPlan plan_distributed_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c,
                               const ModelSplit& split) {
  const DataAxes axes = DataAxes::of(mesh);
  StepPlan plan;
  if (axes.all->size() == 1) return plan;
  const auto groups = split_gradient_groups(model.parameters(), split.expert_parameters, *axes.all, *axes.expert_data);
  const std::vector<BucketLayout> buckets = gradient_buckets(groups, c.bucket_mb, 1);
  for (size_t i = 0; i < buckets.size(); ++i) {
    add_planned(plan, mesh, {groups[buckets[i].group].group->name(), CollectiveOp::kAllReduce,
                             wire_bytes(c.reduce_dtype, buckets[i].layout.padded()), "grads bucket " + std::to_string(i),
                             i + 1 < buckets.size() ? Hides::kBackward : Hides::kNothing});
  }
  return plan;
}

}  // namespace shardlab::parallel
