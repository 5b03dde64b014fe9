// Planner: for a model, a global batch and a number of chips, try every layout
// data x fsdp x context x pipe x expert x tensor that multiplies to the chip count (and,
// per layout, each power-of-two microbatch count), rank the feasible ones by predicted
// step time then memory per chip, and say why each other layout loses. A context axis is
// tried only where data x fsdp x expert x context does not divide the batch's sequences
// (fewer sequences than chips, or a factor of the chip count they lack), or with
// config.shardlab_activations wherever train_gpt can train one. On CPU ranks
// (config.cpu_step: `--cluster local`) each layout is also tried with ZeRO-1/2 over its
// data axis, sequence parallelism on its tensor axis and every pipeline schedule.
//
//   Plan plan = plan_training(cfg, 64, hardware("tpu-v5p"));
//   layout_summary(plan.ranked[0].estimate.layout);   // the winner
//   plan.ranked[3].verdict;  // "communication-bound: fsdp traffic 1.2 s > compute 0.8 s"
//   plan.ranked[4].verdict;  // "slower by 32% (compute 208 vs 208 ms; exposed communication
//                            //  65.8 of 197 ms vs 0 of 197 ms)": against the best's
//
// The ranking prices every layout with the config's wire dtypes (TrainingPrecision::wire).
// A communication-bound layout is priced again with each narrower wire (network/wire_format.h)
// and, where one shortens its step, the entry says so after its verdict, with the flags:
//   "communication-bound: fsdp traffic 0.197 s > compute 0.159 s; bf16 gathers would cut
//    the step from 0.197 s to 0.159 s, compute-bound (--gather-dtype bf16)"
// (after another verdict, e.g. "best", it names the axis: "; communication-bound on data: ...").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "parallel/cost/training/train_step.h"

namespace shardlab::cost {

// A layout priced again with narrower wires than the config's.
struct WireAdvice {
  WireDtypes wire;         // the wires suggested
  StepEstimate estimate;   // the same layout (microbatches included) priced with them
  std::string flags;       // the flags that change: "--reduce-dtype bf16 --gather-dtype int8"
  std::string reason;      // "bf16 gradient reductions would cut the step from 0.2 s to 0.16 s (--reduce-dtype bf16)"
};

// For a communication-bound estimate (of `config` on `hw`): the least compressed wires that
// make the layout compute-bound, otherwise those giving the shortest step (the least
// compressed of equals). Nothing when the estimate is compute-bound or no narrower wire
// shortens its step by 0.1% or more.
std::optional<WireAdvice> wire_advice(const TrainConfig& config, const StepEstimate& estimate,
                                      const HardwareProfile& hw);

struct PlanEntry {
  StepEstimate estimate;
  std::string verdict;  // "best", or why this layout loses to the best; then the advice's reason
  std::optional<WireAdvice> compression;  // wire_advice of a communication-bound layout that fits
};

struct Plan {
  std::vector<PlanEntry> ranked;                 // fitting layouts first, fastest first
  std::map<std::string, int> skipped;            // why layouts could not run -> how many
  int feasible = 0;                              // layouts that fit in memory
};

Plan plan_training(const TrainConfig& config, int chips, const HardwareProfile& hw);

}  // namespace shardlab::cost
