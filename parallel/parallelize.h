// parallelize(model, mesh, config): the one way a model is parallelised.
//
// It applies the strategies from outside the model, each on its mesh axis, in the fixed
// order of `strategies(mesh)` -- tensor, then expert, then pipeline, then the data axes
// (DDP, ZeRO-1/2 or FSDP) -- and returns what they made as one facade, ParallelModel
// (parallel_model.h), which a training loop holds whatever the layout:
//
//   const Layout layout = Layout::from_spec(spec);
//   layout.validate({.model = config, .global_batch = B, .microbatches = k}, world);
//   Mesh mesh(job, layout.axes);
//   auto model = nn::deferred_transformer(config);  // shapes, no storage yet
//   ParallelModel parallel = parallelize(*model, mesh, {.data = {.zero = 1, .seed = seed}});
//   optim::AdamW optimizer(parallel.parameters(), {.weight_decay = 0.1f});  // this rank's views
//   for (...) train_step(*model, parallel, optimizer, loader.next(), k, lr, 1.0);  // train_step.h
//
// Parameters built under nn::DeferParameters are allocated and initialised here from
// config.data.seed, each rank only what it keeps; every layout starts from the same model.
// plan_step() walks the same list of strategies to predict a step's collectives without
// running it, so the dry run and the check of plan agreement cannot drift from the run.
#pragma once

#include <memory>
#include <vector>

#include "framework/nn/transformer.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"
#include "parallel/context/context_parallel.h"
#include "parallel/data_parallel/gradient_sync.h"
#include "parallel/parallel_model.h"
#include "parallel/pipeline/pipeline.h"
#include "parallel/tensor/tensor_parallel.h"

namespace shardlab::parallel {

struct ParallelConfig {
  DataParallelConfig data = {};      // ZeRO stage, buckets, overlap, seed
  TensorParallelConfig tensor = {};  // sequence parallelism, collective matmul
  PipelineConfig pipeline = {};      // schedule, virtual stages, microbatches, split
  ContextParallelConfig context = {};  // ring or all-gather attention, load balancing
  PrecisionPolicy precision = {};    // compute and reduce dtypes (framework/precision.h)
};

// The strategies a mesh gets, in the order they are applied: one for each model-parallel
// axis larger than 1 (tensor/tensor_parallel.h, expert/expert_parallel.h,
// pipeline/pipeline.h), the context axis's sequence split (context/context_parallel.h,
// which leaves the parameters whole), and last, always, the data axes' gradient synchroniser
// (data_parallel/gradient_sync.h), which owns the optimizer's views even on one rank.
enum class Strategy { kTensor, kExpert, kPipeline, kContext, kData };
std::vector<Strategy> strategies(const Mesh& mesh);

// Layout::validate has checked the model and batch against the axes on every rank beforehand.
ParallelModel parallelize(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config);

// Inference (generate): only the model-parallel strategies, tensor today -- no optimizer,
// no gradient reduction; the stream's all_reduces carry config.precision.activation.
// Deferred parameters are allocated (each rank its shards) and filled from config.data.seed
// (zeros under nn::WeightsLoadedNext), to be overwritten from a checkpoint through the
// returned shards (nullptr without model parallelism; sharded_io.h's ParamIO takes either).
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

// The bytes one message between pipeline stages carries in such a step (an activation
// forward, or its gradient back): the schedule's sends and recvs, point-to-point on the
// pipe axis, are checked by the schedule itself rather than planned (pipeline/schedule.h).
int64_t pipeline_message_bytes(const nn::ModelConfig& model, const Mesh& mesh, const ParallelConfig& config,
                               const StepShape& step);

}  // namespace shardlab::parallel
