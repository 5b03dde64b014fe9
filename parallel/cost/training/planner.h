// Planner: for a model, a global batch and a number of chips, try every layout
// data x fsdp x context x pipe x expert x tensor that multiplies to the chip count (and,
// per layout, each power-of-two microbatch count), rank the feasible ones by predicted
// step time then memory per chip, and say why each other layout loses. A context axis is
// tried only where data x fsdp x expert x context does not divide the batch's sequences
// (fewer sequences than chips, or a factor of the chip count they lack), or with
// config.shardlab_activations wherever train_gpt can train one.
//
//   Plan plan = plan_training(cfg, 64, hardware("tpu-v5p"));
//   plan.ranked[0].estimate.layout.describe();   // the winner
//   plan.ranked[3].verdict;  // "communication-bound: fsdp traffic 1.2 s > compute 0.8 s"
#pragma once

#include <map>
#include <string>
#include <vector>

#include "parallel/cost/training/train_step.h"

namespace shardlab::cost {

struct PlanEntry {
  StepEstimate estimate;
  std::string verdict;  // "best", or why this layout loses to the best
};

struct Plan {
  std::vector<PlanEntry> ranked;                 // fitting layouts first, fastest first
  std::map<std::string, int> skipped;            // why layouts could not run -> how many
  int feasible = 0;                              // layouts that fit in memory
};

Plan plan_training(const TrainConfig& config, int chips, const HardwareProfile& hw);

}  // namespace shardlab::cost
