// GradientBuckets: the bucketed gradient reducer DP and ZeRO-1/2 share (PyTorch DDP's
// Reducer, picotron's bucket.py).
//
// The parameters, in reverse registration order (roughly the order backward produces their
// gradients), are packed into buckets of about bucket_mb. A grad hook counts each bucket's
// gradients; once the last one arrives during a synchronising backward, the bucket is
// packed into one flat buffer and its reduction launched asynchronously, overlapping the
// rest of the backward. finish() waits for them all (launching any a hook did not), after
// which each bucket holds the sum over the group: all of it (kAllReduce) or this rank's
// slice of it (kReduceScatter). The per-parameter gradients are zeroed once packed.
//
// Parameters may come in several groups, each reduced over its own ranks (under expert
// parallelism the dense parameters over every batch rank, the experts over the ranks
// holding the same experts); a bucket never mixes groups.
//
//   GradientBuckets buckets({{params, &mesh.axis("data")}}, 4.0, 1, GradientBuckets::kAllReduce, true,
//                           MemoryCategory::Gradients);
//   buckets.set_sync(last_microbatch);   // before each microbatch's backward
//   loss.backward();                      // buckets launch as they fill
//   const double waited = buckets.finish();
//   for (auto& b : buckets.buckets()) use(b->flat);
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "framework/memory.h"
#include "framework/nn/module.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/step_plan.h"
#include "parallel/data_parallel/error_feedback.h"
#include "parallel/data_parallel/flat_layout.h"

namespace shardlab::parallel {

// Parameters whose gradients are reduced over one group.
struct GradientGroup {
  std::vector<nn::Parameter> params;
  const AxisGroup* group = nullptr;
};

// `params` as gradient groups: the dense parameters reduced over `dense`, those named in
// `experts` over `expert_group`; a group with no parameters is left out.
std::vector<GradientGroup> split_gradient_groups(const std::vector<nn::Parameter>& params,
                                                 const std::set<std::string>& experts, const AxisGroup& dense,
                                                 const AxisGroup& expert_group);

// A bucket's layout and the index of the GradientGroup its parameters belong to.
struct BucketLayout {
  FlatLayout layout;
  size_t group = 0;
};

class GradientBuckets {
 public:
  enum Reduction { kAllReduce, kReduceScatter };

  struct Bucket {
    explicit Bucket(BucketLayout l) : layout(std::move(l.layout)), group(l.group) {}
    FlatLayout layout;
    size_t group;  // index into the GradientGroups
    size_t ready = 0;
    Tensor flat;   // the packed gradients; after finish() their sum (kAllReduce)
    Tensor slice;  // kReduceScatter: after finish(), this rank's slice of the sum
    CollectiveHandle handle;
  };

  // Buckets are padded to a multiple of `shards` (for kReduceScatter, every group's size;
  // for ZeRO-1, the shard group the optimizer state follows). `kept` is what the reduced
  // gradients count as in the memory tracker; `wire` what the reductions carry
  // (collectives.h: bf16 halves the bytes, int8 quarters them with error feedback, sums
  // stay fp32).
  GradientBuckets(std::vector<GradientGroup> groups, double bucket_mb, int shards, Reduction reduction, bool overlap,
                  MemoryCategory kept, DType wire = DType::kF32);

  // Whether the coming backward is the one whose gradients are reduced (the last
  // microbatch's); the others only accumulate.
  void set_sync(bool sync) { sync_ = sync; }
  // Waits for every bucket's reduction, launching those not yet launched; returns the
  // seconds spent waiting (the exposed communication).
  double finish();
  // Drops the reduced buffers and the per-parameter gradients.
  void zero_grad();

  std::vector<std::unique_ptr<Bucket>>& buckets() { return buckets_; }
  const std::vector<std::unique_ptr<Bucket>>& buckets() const { return buckets_; }

 private:
  void on_grad_ready(Bucket& bucket);
  void launch(Bucket& bucket);

  std::vector<GradientGroup> groups_;
  Reduction reduction_;
  bool overlap_;
  MemoryCategory kept_;
  DType wire_;
  ErrorFeedback feedback_;
  bool sync_ = true;
  int in_flight_ = 0;
  std::vector<std::unique_ptr<Bucket>> buckets_;
};

// The bucket layouts GradientBuckets makes of `groups`, padded to a multiple of `shards`:
// each group's parameters in reverse order, group after group.
std::vector<BucketLayout> gradient_buckets(const std::vector<GradientGroup>& groups, double bucket_mb, int shards);

}  // namespace shardlab::parallel
