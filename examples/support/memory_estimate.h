// A lower bound on the memory one rank of a training run needs, checked before anything
// is allocated: sizes that cannot fit are refused with the bytes, the machine's memory and
// the flags to change, instead of failing in std::bad_alloc midway.
#pragma once

#include "examples/support/run_config.h"
#include "parallel/layout.h"

namespace shardlab::cli {

struct MemoryEstimate {
  double params = 0, grads = 0, optimizer = 0;  // this rank's share, bytes
  double activations = 0;                       // one microbatch's saved activations and logits
  double total() const { return params + grads + optimizer + activations; }
};

// The cost model's fp32 training memory (cost/transformer.h) divided as `layout` and
// --zero shard it; a lower bound (attention scores, temporaries and buffers come on top).
MemoryEstimate estimate_rank_memory(const RunConfig& run, const parallel::Layout& layout);

// UserError, naming the estimate, this machine's memory and what to change, when the
// estimate exceeds the machine's physical memory. The same on every rank.
void check_fits_in_memory(const RunConfig& run, const parallel::Layout& layout);

}  // namespace shardlab::cli
