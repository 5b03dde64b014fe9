// ZeRO stages 1 and 2 (the ZeRO paper; DeepSpeed's stage 1/2 optimizer): parameters stay
// whole on every rank, AdamW's state is sharded over the shard group, and
//   stage 1  gradients are all-reduced in buckets and kept whole until the step,
//   stage 2  gradients are reduce-scattered in buckets: each rank keeps only its slice
//            (hybrid sharding also all-reduces that slice over the replica group);
// then each rank updates its slice of the parameters and all-gathers them, bucket by
// bucket. Checkpoints gather the sharded state one bucket at a time (sharded_io.h).
// parallelize() builds it for --zero 1 and 2; gradient_sync.h is its interface.
#pragma once

#include <memory>

#include "framework/nn/transformer.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"
#include "parallel/data_parallel/gradient_sync.h"

namespace shardlab::parallel {

// config.zero is 1 or 2. Parameters built under nn::DeferParameters are allocated and
// initialised in full from config.seed: every rank holds the whole model.
std::unique_ptr<GradientSync> make_zero(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                                        const ModelSplit& split);

// The collectives it issues in one step, in issue order (step_plan.h).
StepPlan plan_zero_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                        const ModelSplit& split);

}  // namespace shardlab::parallel
