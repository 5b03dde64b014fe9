// GradientBuckets: the bucketed gradient reducer DP and ZeRO-1/2 share (STYLE 6;
// PyTorch DDP's Reducer, picotron's bucket.py).
//
// The parameters, in reverse registration order (roughly the order backward produces their
// gradients), are packed into buckets of about bucket_mb. A grad hook counts each bucket's
// gradients; once the last one arrives during a synchronising backward, the bucket is
// packed into one flat buffer and its reduction launched asynchronously, overlapping the
// rest of the backward. finish() waits for them all (launching any a hook did not), after
// which each bucket holds the sum over the group: all of it (kAllReduce) or this rank's
// slice of it (kReduceScatter). The per-parameter gradients are zeroed once packed.
//
//   GradientBuckets buckets(params, 4.0, 1, mesh.axis("data"), GradientBuckets::kAllReduce, true,
//                           MemoryCategory::Gradients);
//   buckets.set_sync(last_microbatch);   // before each microbatch's backward
//   loss.backward();                      // buckets launch as they fill
//   const double waited = buckets.finish();
//   for (auto& b : buckets.buckets()) use(b->flat);
#pragma once

#include <memory>
#include <vector>

#include "framework/memory.h"
#include "framework/nn/module.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/step_plan.h"
#include "parallel/data_parallel/flat_layout.h"

namespace shardlab::parallel {

class GradientBuckets {
 public:
  enum Reduction { kAllReduce, kReduceScatter };

  struct Bucket {
    explicit Bucket(FlatLayout l) : layout(std::move(l)) {}
    FlatLayout layout;
    size_t ready = 0;
    Tensor flat;   // the packed gradients; after finish() their sum (kAllReduce)
    Tensor slice;  // kReduceScatter: after finish(), this rank's slice of the sum
    CollectiveHandle handle;
  };

  // Buckets are padded to a multiple of `shards` (for kReduceScatter, `group`'s size; for
  // ZeRO-1, the shard group the optimizer state follows). `kept` is what the reduced
  // gradients count as in the memory tracker.
  GradientBuckets(const std::vector<nn::Parameter>& params, double bucket_mb, int shards, const AxisGroup& group,
                  Reduction reduction, bool overlap, MemoryCategory kept);

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

  const AxisGroup& group_;
  Reduction reduction_;
  bool overlap_;
  MemoryCategory kept_;
  bool sync_ = true;
  int in_flight_ = 0;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<nn::Parameter> params_;
};

// The bucket layouts GradientBuckets makes of `params`, padded to a multiple of `shards`.
std::vector<FlatLayout> gradient_buckets(const std::vector<nn::Parameter>& params, double bucket_mb, int shards);

}  // namespace shardlab::parallel
