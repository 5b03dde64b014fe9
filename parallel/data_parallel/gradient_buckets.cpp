#include "parallel/data_parallel/gradient_buckets.h"

#include <algorithm>
#include <chrono>

#include "framework/error.h"

namespace shardlab::parallel {

std::vector<GradientGroup> split_gradient_groups(const std::vector<nn::Parameter>& params,
                                                 const std::set<std::string>& experts, const AxisGroup& dense,
                                                 const AxisGroup& expert_group) {
  GradientGroup d{{}, &dense}, e{{}, &expert_group};
  for (const nn::Parameter& p : params) (experts.contains(p.name) ? e : d).params.push_back(p);
  std::vector<GradientGroup> groups;
  for (GradientGroup* g : {&d, &e}) {
    if (!g->params.empty()) groups.push_back(std::move(*g));
  }
  return groups;
}

std::vector<BucketLayout> gradient_buckets(const std::vector<GradientGroup>& groups, double bucket_mb, int shards) {
  const int64_t bucket_elems = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * (1 << 20) / sizeof(float)));
  std::vector<BucketLayout> buckets;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<FlatLayout::Param> pending;
    int64_t pending_elems = 0;
    auto close_bucket = [&] {
      if (pending.empty()) return;
      buckets.push_back({FlatLayout(pending, shards), g});
      pending.clear();
      pending_elems = 0;
    };
    const std::vector<nn::Parameter>& params = groups[g].params;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      pending.push_back({it->name, *it->tensor, it->decay});
      pending_elems += it->tensor->numel();
      if (pending_elems >= bucket_elems) close_bucket();
    }
    close_bucket();
  }
  return buckets;
}

GradientBuckets::GradientBuckets(std::vector<GradientGroup> groups, double bucket_mb, int shards, Reduction reduction,
                                 bool overlap, MemoryCategory kept, DType wire)
    : groups_(std::move(groups)), reduction_(reduction), overlap_(overlap), kept_(kept), wire_(wire), feedback_(wire) {
  for (const GradientGroup& g : groups_) {
    SL_ASSERT(reduction == kAllReduce || shards == g.group->size(), "a reduce-scatter's buckets split over its group");
  }
  for (BucketLayout& layout : gradient_buckets(groups_, bucket_mb, shards)) {
    buckets_.push_back(std::make_unique<Bucket>(std::move(layout)));
  }
  for (auto& bucket : buckets_) {
    Bucket* b = bucket.get();
    for (const FlatEntry& e : b->layout.entries()) {
      Tensor p = e.param;
      p.add_grad_hook([this, b](Tensor&) { on_grad_ready(*b); });
    }
  }
}

void GradientBuckets::on_grad_ready(Bucket& b) {
  if (in_flight_ > 0) {
    for (auto& other : buckets_) other->handle.test();  // OpenMPI progresses only inside MPI calls
  }
  if (sync_ && ++b.ready == b.layout.entries().size() && overlap_) launch(b);
}

void GradientBuckets::launch(Bucket& b) {
  b.ready = 0;
  {
    // A reduce-scatter keeps only its slice; the full buffer is then a transient send buffer.
    MemoryScope scope(reduction_ == kReduceScatter ? MemoryCategory::Communication : kept_);
    b.flat = Tensor::empty({b.layout.padded()});
  }
  b.layout.pack_grads(b.flat.span());
  // The packed copy is what travels; the per-parameter gradients are not needed past here.
  for (const FlatEntry& e : b.layout.entries()) Tensor(e.param).zero_grad();
  const AxisGroup& group = *groups_[b.group].group;
  if (reduction_ == kReduceScatter) {
    MemoryScope scope(kept_);
    b.slice = Tensor::empty({b.layout.shard_size()});
    b.handle = reduce_scatter_async(group, b.flat.span(), b.slice.span(), Algorithm::kAuto, wire_,
                                    feedback_.residual(&b, 0, group, CollectiveOp::kReduceScatter, b.layout.padded()));
  } else {
    b.handle = all_reduce_async(group, b.flat.span(), ReduceOp::kSum, Algorithm::kAuto, wire_,
                                feedback_.residual(&b, 0, group, CollectiveOp::kAllReduce, b.layout.padded()));
  }
  ++in_flight_;
}

double GradientBuckets::finish() {
  double waited = 0;
  for (auto& bucket : buckets_) {
    Bucket& b = *bucket;
    if (!b.flat.defined()) launch(b);  // not overlapped, or a parameter got no gradient
    const auto t0 = std::chrono::steady_clock::now();
    b.handle.wait();
    waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (reduction_ == kReduceScatter) b.flat = Tensor();
  }
  in_flight_ = 0;
  return waited;
}

void GradientBuckets::zero_grad() {
  for (const GradientGroup& g : groups_) {
    for (const nn::Parameter& p : g.params) p.tensor->zero_grad();
  }
  for (auto& b : buckets_) {
    b->flat = Tensor();
    b->slice = Tensor();
    b->ready = 0;
  }
}

}  // namespace shardlab::parallel
