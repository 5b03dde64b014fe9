// The book's GPU conditions of one training layout (chapter "gpus", "Rooflines for LLM
// Scaling on GPUs"; parallel/cost/training/gpu_conditions.h) as `train` prints them on a switched
// network: the text lines under "book conditions (gpus.md)" and the `book_conditions`
// JSON object (docs/plan_json.md).
//
// With hw.sharp (train --sharp): pure DP's AllReduce with in-network reduction.
//
//   text += plan::gpu_conditions_text(config, estimate, hardware("h100"));
#pragma once

#include <string>

#include "examples/plan/args.h"
#include "parallel/cost/training/train_step.h"

namespace shardlab::plan {

std::string gpu_conditions_text(const cost::TrainConfig& config, const cost::StepEstimate& estimate,
                                const cost::HardwareProfile& hw);
// The last line of either chapter's conditions (this and layout_conditions' in
// examples/plan/train.cpp): the book's T_comms/T_math of the layout (<= 1: compute-bound) beside the
// cost model's step, compute (with its pipeline bubble) and communication.
std::string book_verdict_line(double comm_to_compute, const cost::StepEstimate& estimate);
Json gpu_conditions_json(const cost::TrainConfig& config, const cost::StepEstimate& estimate,
                         const cost::HardwareProfile& hw);

}  // namespace shardlab::plan
