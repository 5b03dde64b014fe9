// The training state one rank holds under model parallelism and ZeRO (book chapter
// "training": FSDP is ZeRO-3; the stages are the ZeRO paper's), in parameters' worth --
// multiply each piece by its bytes per parameter. The cost model's step estimate
// (training/train_step.h) and train_gpt's memory check (parallel/runtime/memory_estimate.h)
// both count memory with it.
//
//   const double local = model_shard_params(count_params(shape), 2, 1, 1);   // tensor = 2
//   ZeroShare z = zero_share(local, 3, 4, false, shape.layers);   // ZeRO-3 over 4 ranks:
//   // z.params = z.grads = z.optimizer = local / 4, z.gathered = 2 local / L
#pragma once

#include "parallel/cost/model/transformer.h"

namespace shardlab::cost {

// Parameters one rank of a tensor x pipe (x expert) model-parallel group holds: the dense
// ones divided by tensor x pipe, the experts' by expert too.
double model_shard_params(const ParamCounts& counts, double tensor, double pipe, double expert);

// What one pipeline rank holds of the model: a share of the blocks (of the MoE blocks apart,
// whose experts the expert axis splits), the token table and learned positions where it
// runs the first stage, the output projection where it runs the last -- under tied
// embeddings a copy of the token table, unless it runs the first stage too.
struct StageHolding {
  double blocks = 1;      // of all blocks, the fraction this rank runs
  double moe_blocks = 1;  // of the MoE blocks, the fraction this rank runs
  bool first = true;      // runs the first stage: embeds
  bool last = true;       // runs the last stage: the head
};
// Parameters one rank holds with that holding, divided by the tensor axis (and the experts'
// by the expert axis too). With the whole model (one stage) it is model_shard_params(..., 1, ...).
double stage_shard_params(const ParamCounts& counts, const StageHolding& holding, double tensor, double expert);

// How ZeRO stage `stage` (0-3) over `shards` ranks divides a rank's `params`: ZeRO-1 the
// optimizer state, ZeRO-2 also the gradients -- unless `grads_whole`, as when accumulated
// microbatches keep the whole gradient until the last -- and ZeRO-3 also the parameters,
// gathering two of the `layers` blocks whole at a time (one in use, the next prefetched).
struct ZeroShare {
  double params = 0, grads = 0, optimizer = 0;  // parameters' worth of each piece
  double gathered = 0;                          // ZeRO-3's gathered blocks (0 below stage 3)
};
ZeroShare zero_share(double params, int stage, double shards, bool grads_whole, double layers);

// The ranks train_gpt's ZeRO stages shard over (parallel/data_parallel/gradient_sync.h,
// DataAxes): the fsdp axis alone when a data axis beside it holds replicas (`hybrid`: fsdp
// > 1 with a data axis in the mesh), else data x fsdp x context.
double zero_shard_ranks(int data, int fsdp, int context, bool hybrid);

}  // namespace shardlab::cost
