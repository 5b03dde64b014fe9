// Saving and restoring a whole training run: model, optimizer state, step, data position.
//
// Layout (docs/checkpoint_format.md): "params/<name>" for every parameter,
// "optim/<kind>/<name>" for optimizer state, root attributes step / optimizer_step /
// data_position / seed, and the run config under group "config". Restoring into a model
// built from the same config continues a run bit for bit.
#pragma once

#include <string>

#include "examples/support/run_config.h"
#include "framework/nn/module.h"
#include "optim/optimizer.h"

namespace shardlab::cli {

struct TrainState {
  int64_t step = 0;           // optimizer steps completed
  int64_t data_position = 0;  // global batches consumed
};

// "<dir>/ckpt_000300.h5"
std::string checkpoint_path(const std::string& dir, int64_t step);

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer* opt, const TrainState& state,
                     const RunConfig& run);

// Checks that the checkpoint was written for the same model (UserError naming what
// differs), then fills the model and, when given, the optimizer.
TrainState load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* opt,
                           const nn::ModelConfig& expected);

}  // namespace shardlab::cli
