// Data parallelism, ZeRO stage 0 (PyTorch's DistributedDataParallel): parameters,
// gradients and optimizer state whole on every rank; gradients all-reduced in buckets
// (gradient_buckets.h) launched from backward hooks as each bucket fills, so that the
// reduction overlaps the rest of backward; then averaged back into each parameter's
// .grad, so that any optimizer (AdamW, SGD) steps on them as in one process.
// Stages 1-2 are zero.h, stage 3 fsdp/fsdp.h; parallelize() chooses among them, and
// gradient_sync.h is the interface all three give the facade.
#pragma once

#include <memory>

#include "framework/nn/transformer.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"
#include "parallel/data_parallel/gradient_sync.h"

namespace shardlab::parallel {

// Parameters built under nn::DeferParameters are allocated and initialised in full from
// config.seed: every rank holds the whole model.
std::unique_ptr<GradientSync> make_distributed_data_parallel(nn::Transformer& model, const Mesh& mesh,
                                                             const DataParallelConfig& config, const ModelSplit& split);

// The collectives it issues in one training step, in issue order (step_plan.h), from the
// parameter shapes alone: the model may be deferred and stays so.
StepPlan plan_distributed_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                               const ModelSplit& split);

}  // namespace shardlab::parallel
