// A training step on CPU ranks, as train_gpt predicts its own: what a FLOP count at the
// GEMM rate misses, at the calibrated memory bandwidth, and how ranks that outnumber a
// machine's cores share them.
//
// train_gpt's prediction without its start-up probe (parallel/runtime/compute_prediction.h)
// adds these three to the FLOPs at the measured GEMM rate, and the planner's
// `--cluster local` ranking (TrainConfig::cpu_step, train_step.h) prices every layout the
// same way, so that both order layouts alike:
//   element-wise work  norms, residuals, softmax, the MLP's activation and the loss over the
//                      vocabulary: replicated on every tensor rank, or divided by it
//   the optimizer      AdamW's pass over the rank's parameters (its ZeRO shard)
//   empty expert slots experts compute every slot of their capacity, filled or not
//
//   const double busy = flops / peak + elementwise_seconds(c, l, hw) + optimizer_seconds(c, l, hw, shards);
//
// With the planner's --probe (TrainConfig::measured_compute) the compute is timed instead,
// as the run's start-up probe times it (examples/plan/layout_probe.h, scaled by its own
// share of a core), and of the functions below only the optimizer's pass is added to it.
#pragma once

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/training/train_step.h"

namespace shardlab::cost {

// AdamW reads weight, gradient and two moments and writes three; zeroing and the gradient
// norm add two more: 9 floats per parameter of the rank's 1 / (tensor x pipe x
// optimizer_shards) share. 0 without a calibrated bandwidth.
double optimizer_seconds(const TrainConfig& c, const Layout& l, const HardwareProfile& hw, double optimizer_shards);

// The ranks AdamW's state shards over: an fsdp or context axis's (ZeRO-3), else the data
// axis's under ZeRO-1/2, else none (1).
double optimizer_shards(const Layout& l);

// The element-wise work of forward and backward on a rank's tokens and layers
// (model/transformer.h, ElementwiseTraffic: the replicated part split over the tensor axis
// too under Layout::sequence_parallel) and the softmax over its vocabulary rows.
double elementwise_seconds(const TrainConfig& c, const Layout& l, const HardwareProfile& hw);

// The FLOPs of the experts' empty capacity slots, over the whole batch, shared by `ranks`:
// ceil(capacity_factor T k / E) rows per sequence each (0: dropless, at most T), where the
// FLOP count charges k per token. 0 for a dense model.
double expert_padding_seconds(const TrainConfig& c, double capacity_factor, int ranks, double flops);

// Threads per core when `ranks` ranks of `threads` threads each run on `cores` cores (at
// least 1): the rate each rank's compute keeps. `cores` 0: this machine's.
double core_sharing(int ranks, int threads, int cores = 0);

}  // namespace shardlab::cost
