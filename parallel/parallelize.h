// parallelize(model, mesh, config): the one way a model is parallelised (DESIGN 3).
//
// It applies the strategies from outside the model in a fixed order -- tensor, then
// expert, then pipeline, then FSDP/DP -- and returns them as a ParallelModel: the pipeline
// (which runs a step's forward and backward passes when there is a pipe axis) and the
// data-parallel strategy that owns the gradient reduction, the sharded optimizer state
// and checkpoint I/O. train_step (train_step.h) is the training step over it; written
// out without a pipeline it reads as llm.c's loop:
//
//   const Layout layout = Layout::from_spec(spec);
//   layout.validate({.model = config, .global_batch = B, .microbatches = k}, world);
//   Mesh mesh(job, layout.axes);
//   auto model = [&] { nn::DeferParameters defer; return std::make_unique<nn::Transformer>(config); }();
//   auto strategy = parallelize(*model, mesh, {.data = {.zero = 1, .seed = seed}});
//   optim::AdamW optimizer(strategy->parameters(), {.weight_decay = 0.1f});  // this rank's views
//   for (...) {
//     for (int i = 0; i < k; ++i) { strategy->begin_microbatch(i, k); loss(i).backward(); }
//     strategy->finish_gradients();
//     optim::clip_grad_norm(optimizer.views(), 1.0, strategy->norm_reduction());
//     optimizer.step(lr);
//     strategy->finish_step();
//     strategy->zero_grad();
//   }
//
// Parameters built under nn::DeferParameters are allocated and initialised here from
// config.data.seed, each rank only what it keeps; every layout starts from the same model.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "framework/nn/transformer.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"

#include "parallel/data_parallel/data_parallel.h"
#include "parallel/pipeline/pipeline.h"
#include "parallel/tensor/tensor_parallel.h"

namespace shardlab::parallel {

struct ParallelConfig {
  DataParallelConfig data = {};      // ZeRO stage, buckets, optimizer, seed
  TensorParallelConfig tensor = {};  // sequence parallelism
  PipelineConfig pipeline = {};      // schedule, virtual stages, microbatches, split
};

// The strategies parallelize() applied, as a training step uses them: the pipeline (if
// the mesh has a pipe axis) runs the forward and backward passes, the data-parallel
// strategy owns the gradient reduction, the views the optimizer updates and checkpoint I/O. It reads as a
// pointer to the latter: dp->finish_gradients(), *dp.
struct ParallelModel {
  std::unique_ptr<DataParallel> data;
  std::unique_ptr<PipelineParallel> pipeline;  // nullptr without a pipe axis

  DataParallel* operator->() const { return data.get(); }
  DataParallel& operator*() const { return *data; }
  // The whole model in the model's tensors on every rank, for evaluation and decoding,
  // until release_full_params().
  void gather_full_params() const;
  void release_full_params() const;
};

// Strategies act on the mesh axes it has: tensor (tensor/tensor_parallel.h), then expert
// (expert/expert_parallel.h: the stages then hold their blocks' share of the experts),
// then pipe (pipeline/pipeline.h), then data and fsdp (data_parallel/, fsdp/). Layout::validate
// has checked the model and batch against the axes on every rank beforehand.
ParallelModel parallelize(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config);

// Collective over the mesh: writes every parameter and its state in `optimizer` (built
// over model->parameters()), unsharded, to the checkpoint at `path`, with the attribute
// optimizer_step; then `finish` adds the run's attributes on mesh rank 0, which commits
// the file. Without a pipe axis rank 0 writes it all; with one, each stage's
// leader (its rank whose other coordinates are 0) writes its stages' tensors into the
// same file in turn -- so those ranks need a filesystem they share.
void save_checkpoint(const Mesh& mesh, const ParallelModel& model, const optim::Optimizer& optimizer,
                     const std::string& path, const std::function<void(CheckpointWriter&)>& finish);
// Every rank reads the parameters and optimizer state it owns, and the optimizer's step.
void load_checkpoint(const CheckpointReader& reader, const ParallelModel& model, optim::Optimizer& optimizer);

// Inference (generate): only the model-parallel strategies, tensor today -- no optimizer,
// no gradient reduction. Deferred parameters are allocated (each rank its shards) and
// filled from config.data.seed, to be overwritten from a checkpoint through the returned
// shards (nullptr without model parallelism; sharded_io.h's ParamIO takes either).
std::shared_ptr<const ModelShards> parallelize_for_inference(nn::Transformer& model, const Mesh& mesh,
                                                             const ParallelConfig& config);

// The shape of one training step: the global batch and how it is cut.
struct StepShape {
  int64_t batch = 1;     // sequences over all data ranks
  int64_t seq_len = 1;
  int microbatches = 1;
};

// The collectives parallelize(model, mesh, config)'s strategies issue in one training
// step, in issue order on each group (step_plan.h), from the parameter shapes alone: the
// model may be deferred and stays so.
StepPlan plan_step(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config, const StepShape& step);

}  // namespace shardlab::parallel
