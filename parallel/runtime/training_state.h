// Saving and restoring a whole training run: model, optimizer state, step, data position.
//
// Layout (docs/checkpoint_format.md): "params/<name>" for every parameter,
// "optim/<kind>/<name>" for optimizer state, root attributes step / optimizer_step /
// data_position / seed, and the run config under group "config". Tensors are always
// unsharded, so any layout (any --mesh, any --zero) resumes any checkpoint, continuing
// the run as if it had never stopped.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "parallel/runtime/run_config.h"
#include "framework/nn/module.h"
#include "parallel/checkpoint/distributed_checkpoint.h"
#include "parallel/parallelize.h"

namespace shardlab::runtime {

struct TrainState {
  int64_t step = 0;           // optimizer steps completed
  int64_t data_position = 0;  // global batches consumed
};

// Before the first step, collective over `comm`: creates the checkpoint directory (on every
// rank: pipeline stages write into it too) and, on comm's rank 0 (it writes the logs),
// checks that the --metrics, --trace and --dump-grads files can be written -- a UserError
// naming the path and the fix now, not after the run's training, thrown on every rank
// (raise_agreed_error), so the job ends at once with exit 1.
void prepare_output_paths(const RunConfig& run, MPI_Comm comm);

// The checkpoint --resume names: a path, or "latest" for the newest checkpoint in `dir`
// that opens as a complete shardlab checkpoint (UserError if there is none).
std::string resolve_resume(const std::string& resume, const std::string& dir);

// "<dir>/ckpt_000300.h5"
std::string checkpoint_path(const std::string& dir, int64_t step);

// Collective over the mesh; the file is written atomically (parallel::save_checkpoint).
void save_checkpoint(const std::string& path, const parallel::Mesh& mesh, const parallel::ParallelModel& model,
                     const optim::Optimizer& optimizer, const TrainState& state, const RunConfig& run);
// What save_checkpoint adds beside the tensors: step, data_position, seed, the config.
void write_run_attributes(CheckpointSink& sink, const TrainState& state, const RunConfig& run);

// Checks that the checkpoint was written for the same model (UserError naming what
// differs), then every rank reads the parameters and optimizer state it owns.
TrainState load_checkpoint(const std::string& path, const parallel::ParallelModel& model, optim::Optimizer& optimizer,
                           const nn::ModelConfig& expected);

// A run on shuffled llm.c shards reads the rows its checkpoint's run would have read only
// with the same --seed and --shuffle (they and data_position are the whole data order):
// UserError naming the checkpoint's values otherwise. Other data: nothing to check.
void check_data_order(const std::string& path, const RunConfig& run);

// Only the weights, for inference (generate): the model config comes from the file.
nn::ModelConfig checkpoint_model_config(const std::string& path);
// Each rank reads its part of every parameter through `shards` (parallelize_for_inference),
// or the whole of it without.
void load_weights(const std::string& path, nn::Module& model, const nn::ModelConfig& expected,
                  std::shared_ptr<const parallel::ModelShards> shards = nullptr);

}  // namespace shardlab::runtime
