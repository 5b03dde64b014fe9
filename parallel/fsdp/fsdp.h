// ZeRO-3 / FSDP: parameters, gradients and optimizer state sharded over the shard group
// (the optimizer, built outside over local_parameters(), sees only this rank's shards).
//
// The model is cut into units: one per Transformer block, plus a root unit for the
// embeddings, final norm and head. A unit's parameters live as this rank's slice of one
// flat buffer (FlatLayout). Communication per training step, for L blocks:
//
//   forward    all_gather(block l) just before block l runs; block l+1's gather is
//              started (prefetched) while l computes; l's full parameters are freed after
//   backward   all_gather(block l) again when its output gradient arrives (block l-1
//              prefetched); once all of l's gradients are done: reduce_scatter(grads of l)
//              and free the full parameters and gradients
//   root       gathered before the forward and kept until its gradients are reduced
//   (with reshard_after_forward = false a block keeps its gathered parameters from its
//   forward to its backward: L + 1 all_gathers, more memory; with overlap = false nothing
//   is prefetched and every reduce_scatter waits until backward ends, so that all of the
//   communication is exposed and can be timed against the computation)
//
// i.e. 2L + 1 all_gathers and L + 1 reduce_scatters per microbatch that syncs (fewer
// gathers when full parameters are held, e.g. while evaluating). With gradient
// accumulation, earlier microbatches keep full gradients locally and skip the
// reduce_scatter (no-sync). Works with rematerialisation: the recomputed forward runs
// inside the gathered window of the backward.
//
// Parameters are module tensors whose storage is swapped in and out (Tensor::share_storage
// and release_storage), so the model and its autograd graph need no change.
#pragma once

#include <memory>

#include "framework/nn/transformer.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"
#include "parallel/data_parallel/gradient_sync.h"

namespace shardlab::parallel {

// Takes each rank's slice of the model's parameters -- copied from an initialised model,
// or computed from the initialisers (config.seed) for one built under
// nn::DeferParameters, which then never holds its full parameters -- and frees the full
// parameters. See data_parallel/gradient_sync.h for the interface.
std::unique_ptr<GradientSync> make_fsdp(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                                        const ModelSplit& split);

// The collectives make_fsdp's strategy issues in one training step, in issue order
// (plan_step in parallel/parallelize.h).
StepPlan plan_fsdp_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                        const ModelSplit& split, int microbatches);

}  // namespace shardlab::parallel
