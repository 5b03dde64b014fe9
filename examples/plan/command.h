// From plan to run: the `mpirun` line (through launch/run.sh) that trains a planned layout
// with train_gpt, so that `shardlab-plan train ... --command` prints the planner's best
// layout as something to paste and `--run` starts it.
//
//   const std::string line = plan::train_command(config, best.layout, "--steps 100");
//   // launch/run.sh -n 4 -- train_gpt --arch gpt --vocab 256 ... --mesh data=2,tensor=2 --batch 32 ...
#pragma once

#include <string>

#include "parallel/cost/training/train_step.h"

namespace shardlab::plan {

// The train_gpt flags for `model` (dimensions, not a preset name, so any planner model
// maps), the mesh in train_gpt's axis order, ZeRO-3 where the layout has an fsdp or
// context axis (the cost model shards the state over both) with the context attention,
// the wire dtypes other than fp32 (--reduce-dtype; --gather-dtype where the layout
// gathers), the batch in sequences of the model's context, the microbatches as
// --grad-accum and the remat policy; `extra` is appended as given. UserError when the batch is not a whole
// number of sequences.
std::string train_command(const cost::TrainConfig& config, const cost::Layout& layout, const std::string& extra);

// launch/run.sh of the repository this build belongs to and train_gpt of this build
// (found from the running executable's path), or the bare names when they cannot be found.
std::string run_script_path();
std::string train_gpt_path();

}  // namespace shardlab::plan
