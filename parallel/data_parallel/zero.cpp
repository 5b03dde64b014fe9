#include "parallel/data_parallel/zero.h"

#include <set>
#include <string>
#include <tuple>

#include "framework/error.h"
#include "framework/memory.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/collectives.h"
#include "parallel/data_parallel/gradient_buckets.h"
#include "parallel/data_parallel/sharded_io.h"

namespace shardlab::parallel {
namespace {

// Stage 1 all-reduces dense gradients over every batch rank and experts over the ranks
// holding them; stage 2 reduce-scatters both over the shard group, then sums each shard
// over its copies (replica_of).
std::vector<GradientGroup> zero_groups(const std::vector<nn::Parameter>& params, int stage,
                                       const std::set<std::string>& experts, const DataAxes& axes) {
  if (stage == 2) return split_gradient_groups(params, experts, *axes.shard, *axes.shard);
  return split_gradient_groups(params, experts, *axes.all, *axes.expert_data);
}

// Where stage 2's shard of a bucket has copies: other shard groups (hybrid) and, for dense
// parameters under expert parallelism, the expert axis; nullptr where it has none.
const AxisGroup* replica_of(const FlatLayout& bucket, const std::set<std::string>& experts, const DataAxes& axes) {
  return experts.contains(bucket.entries().front().name) ? axes.replica : axes.dense_replica;
}

class ZeroDataParallel : public GradientSync {
 public:
  ZeroDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config, const ModelSplit& split);
  void set_sync(bool sync) override { buckets_.set_sync(sync); }
  void finish_gradients() override;
  optim::ParamViews local_parameters() override;
  // Each rank counts its own slice of the gradients.
  const AxisGroup* gradient_shard_group() const override { return axes_.shard; }
  void finish_step() override;
  void zero_grad() override { buckets_.zero_grad(); }
  void save(CheckpointSink* writer, const optim::Optimizer& optimizer) override;
  void load(const CheckpointReader& reader, const optim::Optimizer& optimizer) override;
  std::string describe() const override;

 private:
  // This rank's averaged gradients of bucket b: all of it (stage 1) or its slice (stage 2),
  // with the element range [lo, hi) of the bucket they cover; empty before they are reduced.
  std::span<float> gradients(GradientBuckets::Bucket& b, int64_t& lo, int64_t& hi) const;
  // The whole bucket's parameters with every slice its owner's fp32 master: under a bf16
  // policy the others' slices this rank holds are their bf16 values (finish_step).
  Tensor gather_masters(const FlatLayout& layout) const;

  DataAxes axes_;
  std::set<std::string> experts_;
  int stage_;
  DType param_dtype_;  // what the parameter all_gather after the update carries
  DType reduce_dtype_;  // what the gradient reductions carry
  ErrorFeedback replica_feedback_;  // of the all_reduce over a hybrid shard's copies (stage 2)
  GradientBuckets buckets_;
  ParamIO io_;
};

ZeroDataParallel::ZeroDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c,
                                   const ModelSplit& split)
    : axes_(DataAxes::of(mesh)), experts_(split.expert_parameters), stage_(c.zero), param_dtype_(c.param_dtype),
      reduce_dtype_(c.reduce_dtype),
      replica_feedback_(c.reduce_dtype),
      // Stage 1 all-reduces over every data rank, but pads to the shard group, whose slices
      // the optimizer state follows.
      buckets_(zero_groups(model.parameters(), c.zero, split.expert_parameters, axes_), c.bucket_mb, axes_.shard->size(),
               c.zero == 2 ? GradientBuckets::kReduceScatter : GradientBuckets::kAllReduce, c.overlap,
               MemoryCategory::Gradients, c.reduce_dtype),
      io_(split.shards) {}

std::span<float> ZeroDataParallel::gradients(GradientBuckets::Bucket& b, int64_t& lo, int64_t& hi) const {
  const Tensor& reduced = stage_ == 1 ? b.flat : b.slice;
  if (stage_ == 1) {
    lo = 0, hi = b.layout.padded();
  } else {
    std::tie(lo, hi) = b.layout.slice(axes_.shard->rank());
  }
  return reduced.defined() ? Tensor(reduced).span() : std::span<float>{};
}

void ZeroDataParallel::finish_gradients() {
  add_exposed_seconds(buckets_.finish());
  const float mean = 1.0f / static_cast<float>(axes_.all->size());
  for (auto& bucket : buckets_.buckets()) {
    int64_t lo = 0, hi = 0;
    std::span<float> g = gradients(*bucket, lo, hi);
    const AxisGroup* replica = replica_of(bucket->layout, experts_, axes_);
    if (stage_ == 2 && replica) {
      const std::span<float> residual = replica_feedback_.residual(bucket.get(), 0, *replica, CollectiveOp::kAllReduce,
                                                                   static_cast<int64_t>(g.size()));
      blocking([&] { all_reduce(*replica, g, ReduceOp::kSum, Algorithm::kAuto, reduce_dtype_, residual); });
    }
    for (float& x : g) x *= mean;
  }
}

// This rank's slice of every bucket: the model's own parameter memory, and the gradient
// elements of the same range.
optim::ParamViews ZeroDataParallel::local_parameters() {
  optim::ParamViews views;
  for (auto& bucket : buckets_.buckets()) {
    const int rank = axes_.shard->rank();
    const int64_t mine_lo = bucket->layout.slice_begin(rank), mine_hi = bucket->layout.slice_end(rank);
    int64_t lo = 0, hi = 0;
    const std::span<float> grads = gradients(*bucket, lo, hi);
    bucket->layout.for_each_overlap(mine_lo, mine_hi, [&](const FlatEntry& e, int64_t a, int64_t z) {
      Tensor param = e.param;
      const std::span<float> grad = grads.empty() ? grads : grads.subspan(a - lo, z - a);
      io_.add_views(views, e.name, param.span().subspan(a - e.offset, z - a), grad, a - e.offset, e.decay);
    });
  }
  return views;
}

// Every rank sends the slice it updated. Under a bf16 policy it travels as bf16 (half the
// bytes): the other slices then hold the bf16 values every layout computes with
// (ops/bf16.h, compute_value), and this rank's slice keeps its fp32 master.
void ZeroDataParallel::finish_step() {
  for (auto& bucket : buckets_.buckets()) {
    const FlatLayout& layout = bucket->layout;
    const int rank = axes_.shard->rank();
    const int64_t mine_lo = layout.slice_begin(rank), mine_hi = layout.slice_end(rank);
    MemoryScope scope(MemoryCategory::Communication);
    Tensor full = Tensor::empty({layout.padded()});
    layout.pack_params(full.span());
    Tensor gathered = Tensor::empty({layout.padded()});
    const std::span<const float> mine = full.span().subspan(mine_lo, mine_hi - mine_lo);
    if (param_dtype_ == DType::kBF16) {
      const Bf16Array sent = Bf16Array::of(mine.data(), static_cast<int64_t>(mine.size()));
      Bf16Array received(layout.padded());
      blocking([&] {
        all_gather(*axes_.shard, std::span<const Bf16>(sent.data(), mine.size()),
                   std::span<Bf16>(received.data(), static_cast<size_t>(layout.padded())));
      });
      received.to_float(gathered.data());
      std::copy(mine.begin(), mine.end(), gathered.data() + mine_lo);  // the master stays fp32
    } else {
      blocking([&] { all_gather(*axes_.shard, mine, gathered.span()); });
    }
    layout.unpack_params(gathered.span());
  }
}

Tensor ZeroDataParallel::gather_masters(const FlatLayout& layout) const {
  const int rank = axes_.shard->rank();
  MemoryScope scope(MemoryCategory::Communication);
  Tensor full = Tensor::empty({layout.padded()});
  layout.pack_params(full.span());
  if (param_dtype_ != DType::kBF16) return full;
  Tensor gathered = Tensor::empty({layout.padded()});
  all_gather(*axes_.shard, full.span().subspan(layout.slice_begin(rank), layout.shard_size()), gathered.span());
  return gathered;
}

void ZeroDataParallel::save(CheckpointSink* writer, const optim::Optimizer& optimizer) {
  const bool writes = axes_.expert_data->rank() == 0;  // each expert rank writes its experts
  for (auto& bucket : buckets_.buckets()) {
    const FlatLayout& layout = bucket->layout;
    const Tensor masters = gather_masters(layout);  // collective over the shard group under bf16
    if (writes) {
      for (const FlatEntry& e : layout.entries()) {
        io_.write(writer, "params/" + e.name, e.name, e.param.shape(),
                  std::span<const float>(masters.data() + e.offset, static_cast<size_t>(e.numel)));
      }
    }
    save_sharded_state(*axes_.shard, layout, optimizer, io_, writes, writer);
  }
}

void ZeroDataParallel::load(const CheckpointReader& reader, const optim::Optimizer& optimizer) {
  const int rank = axes_.shard->rank();
  for (auto& bucket : buckets_.buckets()) {
    const FlatLayout& layout = bucket->layout;
    for (const FlatEntry& e : layout.entries()) {
      Tensor p = e.param;
      io_.read(reader, "params/" + e.name, e.name, p.shape(), p.span());
    }
    load_sharded_state(reader, layout, rank, io_, optimizer);
  }
}

std::string ZeroDataParallel::describe() const {
  return "ZeRO-" + std::to_string(stage_) + " over " + axes_.all->name() + " (" + std::to_string(axes_.all->size()) +
         " ranks), " + std::to_string(buckets_.buckets().size()) + " gradient buckets, shards over " +
         axes_.shard->name();
}

}  // namespace

std::unique_ptr<GradientSync> make_zero(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                                        const ModelSplit& split) {
  SL_ASSERT(config.zero == 1 || config.zero == 2, "ZeRO stages 1 and 2 share this strategy");
  nn::initialize_unallocated(model, config.seed);  // deferred: every rank holds the whole model
  return std::make_unique<ZeroDataParallel>(model, mesh, config, split);
}

// What ZeroDataParallel issues in one step: the bucket reductions of the last microbatch
// (launched during its backward, or after it without overlap), then the replica
// all-reduces of a hybrid ZeRO-2 once all have arrived, the norm of the sharded
// gradients (each rank counts its slice), and the parameter all-gathers after the
// optimizer step.
StepPlan plan_zero_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c,
                        const ModelSplit& split) {
  const DataAxes axes = DataAxes::of(mesh);
  const bool stage2 = c.zero == 2;
  const std::vector<GradientGroup> groups = zero_groups(model.parameters(), c.zero, split.expert_parameters, axes);
  const std::vector<BucketLayout> buckets = gradient_buckets(groups, c.bucket_mb, axes.shard->size());
  StepPlan plan;
  const auto reduce = [&](size_t i) {
    const std::string what = "grads bucket " + std::to_string(i);
    const int64_t bytes = wire_bytes(c.reduce_dtype, buckets[i].layout.padded());
    const std::string& group = groups[buckets[i].group].group->name();
    add_planned(plan, mesh, {group, stage2 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, bytes, what,
                             i + 1 < buckets.size() ? Hides::kBackward : Hides::kNothing});
  };
  const auto replica = [&](size_t i) {
    const AxisGroup* copies = replica_of(buckets[i].layout, split.expert_parameters, axes);
    if (stage2 && copies) {
      add_planned(plan, mesh, {copies->name(), CollectiveOp::kAllReduce, wire_bytes(c.reduce_dtype, buckets[i].layout.shard_size()),
                               "grads bucket " + std::to_string(i) + ", this shard"});
    }
  };
  for (size_t i = 0; i < buckets.size(); ++i) reduce(i);
  for (size_t i = 0; i < buckets.size(); ++i) replica(i);
  add_planned(plan, mesh, {axes.shard->name(), CollectiveOp::kAllReduce, kBytesPerFloat, "gradient norm"});
  for (size_t i = 0; i < buckets.size(); ++i) {
    add_planned(plan, mesh, {axes.shard->name(), CollectiveOp::kAllGather,
                             wire_bytes(c.param_dtype, buckets[i].layout.padded()), "params bucket " + std::to_string(i)});
  }
  return plan;
}

}  // namespace shardlab::parallel
