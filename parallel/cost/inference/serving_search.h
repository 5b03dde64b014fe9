// The best decode throughput under a latency limit (book "applied-inference", worked
// problem Q3: which slice and batch serve the most tokens per chip while each decode step
// stays within a budget). Every power-of-two slice from the smallest that holds the weights
// up to `max_chips` is tried with the largest batch whose KV caches fit its free HBM at
// `context` and whose estimate_decode step is within `max_step_seconds` (the step grows with
// the batch, so a bisection finds it); the best slice serves the most tokens/s per chip
// (within 0.1%, the smallest such slice).
//
// Dimension letters: B batch (sequences decoded together), T context (KV length).
//
//   LatencyLimitedServing s = best_serving_under_latency(m, {.context = 8192, .weights = DType::kInt8},
//                                                        0.02, 64, hardware("tpu-v5e"));
//   s.slices[s.best].chips, s.slices[s.best].batch, s.slices[s.best].step.tokens_per_second_per_chip
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/cost/inference/prefill_decode.h"

namespace shardlab::cost {

struct LatencyLimitedSlice {
  int chips = 0;
  int64_t max_batch = 0;  // KV caches of `context` tokens the free HBM holds
  int64_t batch = 0;      // the largest within the limit; 0 when not even batch 1 meets it
  DecodeEstimate step;    // at `batch` (at batch 1 when batch is 0: how far off the limit is)
};

struct LatencyLimitedServing {
  std::vector<LatencyLimitedSlice> slices;  // smallest slice first
  int best = -1;                            // index of the most tokens/s per chip; -1: none meets the limit
};

// `config` gives the context, weight and activation dtypes (its batch and chips are
// ignored). UserError when the limit is not positive, max_chips is below the smallest
// slice that holds the weights, or the model has no KV bytes per token.
LatencyLimitedServing best_serving_under_latency(const ServedModel& model, const InferenceConfig& config,
                                                 double max_step_seconds, int max_chips, const HardwareProfile& hw);

}  // namespace shardlab::cost
