#include "parallel/data_parallel/zero.h"

#include <tuple>

#include "framework/memory.h"
#include "optim/clip.h"
#include "parallel/comm/collectives.h"
#include "parallel/data_parallel/gradient_buckets.h"
#include "parallel/data_parallel/sharded_adamw.h"
#include "parallel/data_parallel/sharded_io.h"

namespace shardlab::parallel {
namespace {

// Stage 1 all-reduces dense gradients over every batch rank and experts over the ranks
// holding them; stage 2 reduce-scatters both over the shard group, then sums each shard
// over its copies (replica_of).
std::vector<GradientGroup> zero_groups(const std::vector<nn::Parameter>& params, const DataParallelConfig& c,
                                       const DataAxes& axes) {
  if (c.zero == 2) return split_gradient_groups(params, c.expert_parameters, *axes.shard, *axes.shard);
  return split_gradient_groups(params, c.expert_parameters, *axes.all, *axes.expert_data);
}

// Where stage 2's shard of a bucket has copies: other shard groups (hybrid) and, for dense
// parameters under expert parallelism, the expert axis; nullptr where it has none.
const AxisGroup* replica_of(const FlatLayout& bucket, const DataParallelConfig& c, const DataAxes& axes) {
  return c.expert_parameters.contains(bucket.entries().front().name) ? axes.replica : axes.dense_replica;
}

class ZeroDataParallel : public DataParallel {
 public:
  ZeroDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config);
  void begin_microbatch(int index, int count) override { buckets_.set_sync(index == count - 1); }
  void finish_gradients() override;
  double clip_grad_norm(double max_norm) override;
  void step(float lr) override;
  void zero_grad() override { buckets_.zero_grad(); }
  void save(CheckpointWriter* writer) override;
  void load(const CheckpointReader& reader) override;
  int64_t optimizer_step() const override { return adamw_->step_count(); }
  std::string describe() const override;

 private:
  // This rank's averaged gradients of bucket b: all of it (stage 1) or its slice (stage 2),
  // with the element range [lo, hi) of the bucket they cover.
  std::span<float> gradients(GradientBuckets::Bucket& b, int64_t& lo, int64_t& hi) const;

  DataAxes axes_;
  DataParallelConfig config_;
  int stage_;
  GradientBuckets buckets_;
  std::unique_ptr<ShardedAdamW> adamw_;
  ParamIO io_;
};

ZeroDataParallel::ZeroDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c)
    : axes_(DataAxes::of(mesh)), config_(c), stage_(c.zero),
      // Stage 1 all-reduces over every data rank, but pads to the shard group, whose slices
      // the optimizer state follows.
      buckets_(zero_groups(model.parameters(), c, axes_), c.bucket_mb, axes_.shard->size(),
               c.zero == 2 ? GradientBuckets::kReduceScatter : GradientBuckets::kAllReduce, c.overlap,
               MemoryCategory::Gradients),
      io_(c.model_shards) {
  std::vector<const FlatLayout*> groups;
  for (auto& b : buckets_.buckets()) groups.push_back(&b->layout);
  adamw_ = std::make_unique<ShardedAdamW>(groups, axes_.shard->rank(), c.adamw);
}

std::span<float> ZeroDataParallel::gradients(GradientBuckets::Bucket& b, int64_t& lo, int64_t& hi) const {
  if (stage_ == 1) {
    lo = 0, hi = b.layout.padded();
    return b.flat.span();
  }
  std::tie(lo, hi) = b.layout.slice(axes_.shard->rank());
  return b.slice.span();
}

void ZeroDataParallel::finish_gradients() {
  add_exposed_seconds(buckets_.finish());
  const float mean = 1.0f / static_cast<float>(axes_.all->size());
  for (auto& bucket : buckets_.buckets()) {
    int64_t lo = 0, hi = 0;
    std::span<float> g = gradients(*bucket, lo, hi);
    const AxisGroup* replica = replica_of(bucket->layout, config_, axes_);
    if (stage_ == 2 && replica) blocking([&] { all_reduce(*replica, g); });
    for (float& x : g) x *= mean;
  }
}

double ZeroDataParallel::clip_grad_norm(double max_norm) {
  std::vector<optim::GradSpan> grads;
  for (auto& bucket : buckets_.buckets()) {
    int64_t lo = 0, hi = 0;
    const std::span<float> flat = gradients(*bucket, lo, hi);
    bucket->layout.for_each_overlap(lo, hi, [&](const FlatEntry& e, int64_t a, int64_t z) {
      io_.add_grad_spans(grads, e.name, flat.subspan(a - lo, z - a), a - e.offset);
    });
  }
  // Stage 1 holds the whole averaged gradient on every rank; stage 2 only a slice of it.
  const AxisGroup* sharded = stage_ == 2 ? axes_.shard : nullptr;
  return optim::clip_grad_norm(grads, max_norm, [&](double local) {
    double global = 0.0;
    blocking([&] { global = io_.reduce_norm(local, sharded); });
    return global;
  });
}

void ZeroDataParallel::step(float lr) {
  adamw_->begin_step();
  auto& buckets = buckets_.buckets();
  for (size_t i = 0; i < buckets.size(); ++i) {
    GradientBuckets::Bucket& b = *buckets[i];
    const auto [mine_lo, mine_hi] = b.layout.slice(axes_.shard->rank());
    int64_t lo = 0, hi = 0;
    const std::span<const float> grad = gradients(b, lo, hi).subspan(mine_lo - lo, mine_hi - mine_lo);
    MemoryScope scope(MemoryCategory::Communication);
    Tensor full = Tensor::empty({b.layout.padded()});
    b.layout.pack_params(full.span());
    std::span<float> mine = full.span().subspan(mine_lo, mine_hi - mine_lo);
    adamw_->update(i, mine, grad, lr);
    Tensor gathered = Tensor::empty({b.layout.padded()});
    blocking([&] { all_gather(*axes_.shard, mine, gathered.span()); });
    b.layout.unpack_params(gathered.span());
  }
}

void ZeroDataParallel::save(CheckpointWriter* writer) {
  const bool writes = axes_.expert_data->rank() == 0;  // each expert rank writes its experts
  auto& buckets = buckets_.buckets();
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (writes) {
      for (const FlatEntry& e : buckets[i]->layout.entries()) {
        io_.write(writer, "params/" + e.name, e.name, e.param.shape(), e.param.span());
      }
    }
    save_sharded(*axes_.shard, buckets[i]->layout, adamw_->m(i).span(), "optim/m/", io_, writes, writer);
    save_sharded(*axes_.shard, buckets[i]->layout, adamw_->v(i).span(), "optim/v/", io_, writes, writer);
  }
}

void ZeroDataParallel::load(const CheckpointReader& reader) {
  const int rank = axes_.shard->rank();
  auto& buckets = buckets_.buckets();
  for (size_t i = 0; i < buckets.size(); ++i) {
    for (const FlatEntry& e : buckets[i]->layout.entries()) {
      Tensor p = e.param;
      io_.read(reader, "params/" + e.name, e.name, p.shape(), p.span());
    }
    load_sharded(reader, buckets[i]->layout, rank, "optim/m/", io_, adamw_->m(i).span());
    load_sharded(reader, buckets[i]->layout, rank, "optim/v/", io_, adamw_->v(i).span());
  }
  adamw_->set_step_count(reader.int_attribute("optimizer_step"));
}

std::string ZeroDataParallel::describe() const {
  return "ZeRO-" + std::to_string(stage_) + " over " + axes_.all->name() + " (" + std::to_string(axes_.all->size()) +
         " ranks), " + std::to_string(buckets_.buckets().size()) + " gradient buckets, shards over " +
         axes_.shard->name();
}

}  // namespace

std::unique_ptr<DataParallel> make_zero_data_parallel(nn::Transformer& model, const Mesh& mesh,
                                                      const DataParallelConfig& config) {
  return std::make_unique<ZeroDataParallel>(model, mesh, config);
}

// What ZeroDataParallel issues in one step: the bucket reductions of the last microbatch
// (launched during its backward, or after it without overlap), then the replica
// all-reduces of a hybrid ZeRO-2 once all have arrived, the norm
// of stage 2's sharded gradients, and the parameter all-gathers of the optimizer step.
StepPlan plan_zero_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c) {
  const DataAxes axes = DataAxes::of(mesh);
  const bool stage2 = c.zero == 2;
  const std::vector<GradientGroup> groups = zero_groups(model.parameters(), c, axes);
  const std::vector<BucketLayout> buckets = gradient_buckets(groups, c.bucket_mb, axes.shard->size());
  StepPlan plan;
  const auto reduce = [&](size_t i) {
    const std::string what = "grads bucket " + std::to_string(i);
    const int64_t bytes = buckets[i].layout.padded() * kBytesPerFloat;
    const std::string& group = groups[buckets[i].group].group->name();
    add_planned(plan, mesh, {group, stage2 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, bytes, what});
  };
  const auto replica = [&](size_t i) {
    const AxisGroup* copies = replica_of(buckets[i].layout, c, axes);
    if (stage2 && copies) {
      add_planned(plan, mesh, {copies->name(), CollectiveOp::kAllReduce, buckets[i].layout.shard_size() * kBytesPerFloat,
                               "grads bucket " + std::to_string(i) + ", this shard"});
    }
  };
  for (size_t i = 0; i < buckets.size(); ++i) reduce(i);
  for (size_t i = 0; i < buckets.size(); ++i) replica(i);
  if (stage2) add_planned(plan, mesh, {axes.shard->name(), CollectiveOp::kAllReduce, kBytesPerFloat, "gradient norm"});
  for (size_t i = 0; i < buckets.size(); ++i) {
    add_planned(plan, mesh, {axes.shard->name(), CollectiveOp::kAllGather, buckets[i].layout.padded() * kBytesPerFloat,
                             "params bucket " + std::to_string(i)});
  }
  return plan;
}

}  // namespace shardlab::parallel
