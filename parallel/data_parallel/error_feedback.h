// ErrorFeedback: the residuals of compressed gradient reductions, kept between steps
// (collectives.h, "Error feedback"; 1-bit Adam and EF-SGD's error compensation).
//
// Under --reduce-dtype int8 every gradient reduction of a data-parallel strategy (a DP
// bucket's all_reduce, a ZeRO or FSDP reduce_scatter, the all_reduce over a hybrid
// shard's copies) gets a residual buffer of its own, zero at first: what this rank's int8
// messages lost in one step is added to the next step's, so the rounding errors cancel
// instead of piling up, and the gradient training sees over many steps is the true sum
// within one rounding. A residual is this rank's alone (it follows this rank's messages),
// lives as long as the strategy, counts as gradient memory, and is not checkpointed: a
// resumed run starts it at zero, one rounding away from the run it resumes.
//
// bf16 keeps none: its rounding is relative to each value (2^-8) and unbiased, as
// PyTorch's and Megatron's bf16 reductions run; fp32 loses nothing.
//
//   ErrorFeedback feedback(DType::kInt8);
//   all_reduce_async(group, flat, ReduceOp::kSum, Algorithm::kAuto, DType::kInt8,
//                    feedback.residual(&bucket, 0, group, CollectiveOp::kAllReduce, flat.size()));
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>

#include "framework/precision.h"
#include "framework/tensor.h"
#include "parallel/comm/collective_types.h"
#include "parallel/comm/mesh.h"

namespace shardlab::parallel {

class ErrorFeedback {
 public:
  explicit ErrorFeedback(DType wire) : wire_(wire) {}

  // The residuals of reduction (`owner`, `part`) -- a stable identity such as a bucket
  // and which of its reductions -- sized for `op` of `elements` values on `group`;
  // empty where the wire keeps none or the group has one rank.
  std::span<float> residual(const void* owner, int64_t part, const AxisGroup& group, CollectiveOp op, int64_t elements);

  int64_t bytes() const;  // held by every residual

 private:
  DType wire_;
  std::map<std::pair<const void*, int64_t>, Tensor> residuals_;
};

}  // namespace shardlab::parallel
