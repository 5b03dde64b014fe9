// ZeRO stages 1 and 2 (the ZeRO paper; DeepSpeed's stage 1/2 optimizer): parameters stay
// whole on every rank, AdamW's state is sharded over the shard group, and
//   stage 1  gradients are all-reduced in buckets and kept whole until the step,
//   stage 2  gradients are reduce-scattered in buckets: each rank keeps only its slice
//            (hybrid sharding also all-reduces that slice over the replica group);
// then each rank updates its slice of the parameters and all-gathers them, bucket by
// bucket. Checkpoints gather the sharded state one bucket at a time (sharded_io.h).
// make_bucketed_data_parallel (data_parallel.h) builds it for --zero 1 and 2.
#pragma once

#include <memory>

#include "parallel/data_parallel/data_parallel.h"

namespace shardlab::parallel {

// `model`'s parameters are allocated; config.zero is 1 or 2.
std::unique_ptr<DataParallel> make_zero_data_parallel(nn::Transformer& model, const Mesh& mesh,
                                                      const DataParallelConfig& config);

// The collectives it issues in one step, in issue order (step_plan.h).
StepPlan plan_zero_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config);

}  // namespace shardlab::parallel
