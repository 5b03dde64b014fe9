// train_gpt --init-from: start a run (fine-tuning) from another run's or another
// framework's weights -- a shardlab checkpoint, a Hugging Face model directory
// (framework/hf_model.h) or an llm.c GPT-2 model file (framework/llmc_model.h) -- with
// fresh optimizer state at step 0, under any layout.
//
// Only the parameters are read, through the same path as --resume (each rank reads the
// part it owns from the unsharded tensors); the file's optimizer state, step and data
// position are ignored. The weights' model config must equal the run's, field by field:
// a difference is a UserError naming the field and both values.
//
//   runtime::init_from(run.init_from, parallel_model, run.model);  // before the first step
#pragma once

#include <string>

#include "framework/nn/config.h"
#include "parallel/parallel_model.h"

namespace shardlab::runtime {

// Collective only in the reads the layout's model-parallel shards need (as --resume).
void init_from(const std::string& source, const parallel::ParallelModel& model, const nn::ModelConfig& expected);

}  // namespace shardlab::runtime
