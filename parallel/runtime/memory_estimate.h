// The memory one rank of a training run needs, checked before anything is allocated: sizes that cannot fit are refused with the bytes, the machine's memory and
// the flags to change, instead of failing in std::bad_alloc midway.
#pragma once

#include <algorithm>

#include "parallel/cost/model/autograd_activations.h"
#include "parallel/layout.h"
#include "parallel/runtime/run_config.h"

namespace shardlab::runtime {

struct MemoryEstimate {
  double params = 0, grads = 0, optimizer = 0;  // this rank's share, bytes
  cost::ActivationBytes activation_parts;       // cost/model/autograd_activations.h
  double activations = 0;                       // their peak: activation_parts.peak()
  double buffers = 0;                           // ZeRO-3's gathered parameters
  double feedback = 0;                          // int8 gradient wire: error-feedback residuals
  // ZeRO-1/2's all_gather of the updated parameters after the step: the packed local
  // parameters and the gathered ones (and the bf16 wire's buffers) beside the gradient
  // slice, activations and whole gradients freed.
  double staging = 0;
  bool grads_held = false;  // gradients counted beside the microbatches in flight (more than one per step)
  // The peak of live bytes: the step's (cost::shardlab_peak_bytes) or the gather's after it.
  double total() const {
    const double state = params + optimizer + buffers + feedback;
    return std::max(cost::shardlab_peak_bytes(state, grads, grads_held, activation_parts), state + staging);
  }
};

// Parameters, gradients and AdamW state (fp32) divided as `layout` (its mesh, ZeRO stage,
// microbatches, sequence parallelism and schedule; RunConfig::layout()) shards them -- on
// pipe rank `stage`, the blocks of its stages, the first stage's embedding and the last
// stage's head -- and the activations shardlab's autograd keeps there
// (cost/model/autograd_activations.h) with the most microbatches its schedule has in
// flight. `run` gives the model, the batch and the precision. Communication buffers are not
// counted.
MemoryEstimate estimate_rank_memory(const RunConfig& run, const parallel::Layout& layout, int stage = 0);

// UserError, naming the estimate, this machine's memory and what to change, when the
// estimate exceeds the machine's physical memory. The same on every rank.
void check_fits_in_memory(const RunConfig& run, const parallel::Layout& layout);

}  // namespace shardlab::runtime
