// Totals of a whole training run (book chapters "transformers", "training" and
// "applied-training"): the 6PT FLOPs of P parameters over T tokens (plus attention when
// the model's shape is known), the cluster's FLOP/s, wall-clock time at a given MFU,
// training state in bytes per parameter, the chips that state needs, and the largest
// model that pure data parallelism (every chip holding all of it) can train.
//
//   RunSpec run{.params = 70e9, .tokens = 15e12, .chips = 8960, .mfu = 0.4};
//   RunTotals t = run_totals(run, hardware("tpu-v5p"));
//   // t.train_flops = 6.3e24, t.seconds = 3.83e6 (44 days), t.state_bytes = 700e9
//   double largest = largest_pure_dp_params(hardware("tpu-v5p"), state_preset("bf16-adam"));  // 9.6e9
//   double mfu = achieved_mfu(6 * 37e9 * 14.8e12, 2.79e6, 1.513e15);  // DeepSeek v3 on H800: 0.216
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {

// Training state in bytes per parameter. The book's count (chapter "training", pure data
// parallelism) is bf16 parameters and Adam's two fp32 moments, 2 + 8 = 10, with gradients
// not counted (each is consumed by the optimizer as it is produced).
struct StateBytes {
  double params = 2;
  double grads = 0;
  double optimizer = 8;
  double per_param() const { return params + grads + optimizer; }
};

// Named StateBytes:
//   bf16-adam  2 + 0 + 8  = 10  the book's: bf16 params, fp32 Adam moments
//   mixed-adam 2 + 2 + 12 = 16  bf16 params and grads, fp32 master copy and moments (ZeRO paper)
//   fp32-adam  4 + 4 + 8  = 16  fp32 everywhere (shardlab on CPU)
//   bf16-sgd   2 + 2 + 0  = 4   inference-like lower bound: no optimizer state
// Throws UserError listing the names.
StateBytes state_preset(const std::string& name);
std::vector<std::string> state_preset_names();

struct RunSpec {
  double params = 0;  // P of 6PT: the parameters a token multiplies (dense: all of them)
  double tokens = 0;  // T: training tokens
  // Training FLOPs per token beyond 6P (attention scores and values, x3 for training);
  // 0 for the book's bare 6PT.
  double extra_flops_per_token = 0;
  // What rematerialisation multiplies the training FLOPs by: 1 without, 8/6 when full remat
  // runs each forward twice (the book's 6ND -> 8ND; train_flops_per_token's ratio for a shape).
  double flops_multiplier = 1;
  int64_t chips = 1;
  double mfu = 1;  // achieved fraction of peak FLOP/s, (0, 1]
  DType dtype = DType::kBf16;  // the matmul units' dtype (their peak)
  StateBytes state = {};
  double activation_bytes = 0;  // saved activations of one batch (gradient checkpoints), bytes
};

struct RunTotals {
  double flops_per_token = 0;        // (6P + extra) x flops_multiplier
  double train_flops = 0;            // flops_per_token x T
  double chip_flops_per_second = 0;  // peak of one chip in dtype
  double cluster_flops_per_second = 0;  // chips x peak
  double cluster_hbm_bytes = 0;      // chips x HBM per chip
  double seconds = 0;                // train_flops / (cluster peak x mfu)
  double days = 0;
  double chip_hours = 0;             // chips x seconds / 3600: what the run bills (GPU-hours)
  double state_bytes = 0;            // P x bytes per parameter
  double total_bytes = 0;            // state + activations
  double bytes_per_chip = 0;         // total spread evenly over the chips (fully sharded)
  int64_t min_chips = 0;             // ceil(total / HBM per chip)
  bool fits = false;                 // bytes_per_chip <= HBM per chip
  double largest_pure_dp_params = 0;  // HBM per chip / bytes per parameter
};

// Throws UserError on non-positive params, tokens or chips, or mfu outside (0, 1].
RunTotals run_totals(const RunSpec& run, const HardwareProfile& hw);

// HBM per chip / state bytes per parameter: pure data parallelism keeps the whole state
// on every chip (the book: v5p's 96 GB / 10 = 9.6e9, "about 9B"). Activations ignored:
// a batch of one token.
double largest_pure_dp_params(const HardwareProfile& hw, const StateBytes& state);

// The MFU a finished run achieved from the chip-hours (GPU-hours) it took: its training
// FLOPs over what those hours could do at peak, train_flops / (chip_hours x 3600 x peak)
// (the book's transformers.md Question 7: DeepSeek v3's 6 x 37e9 x 14.8e12 FLOPs in 2.79M
// H800-hours at 1.513e15 fp8 FLOP/s, 21.7%). UserError on non-positive arguments.
double achieved_mfu(double train_flops, double chip_hours, double peak_flops_per_chip);

// Gradient checkpoints kept for backward: `per_layer` arrays of [tokens, D] in `dtype` in
// each of `layers` layers (the book's "checkpoint 4 times per layer": 2 x D x B x 4 x L).
double checkpoint_bytes(double tokens, int64_t layers, int64_t d_model, double per_layer, DType dtype);

constexpr double kSecondsPerDay = 86400;
constexpr double kSecondsPerHour = 3600;

}  // namespace shardlab::cost
