// The standard test run (reference_run.h) of a parallelised model, and its comparison
// with the single process: every parallel strategy's test trains and checks through these.
#pragma once

#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <memory>

#include "optim/make_optimizer.h"
#include "parallel/parallelize.h"
#include "parallel/train_step.h"
#include "tests/reference_run.h"

namespace shardlab::testing {

// The standard run's optimizer (reference_run.h), or `config`'s, over this rank's parameter views.
inline std::unique_ptr<optim::Optimizer> standard_optimizer(const parallel::ParallelModel& strategy,
                                                            const optim::OptimizerConfig& config = kStandardOptimizer) {
  return optim::make_optimizer(config, strategy.parameters());
}

// Trains `model`, parallelised as `strategy` on `mesh`, for the standard run in
// `microbatches`; each step's loss of the whole global batch and gradient norm, and
// after the steps the whole model gathered (this rank's shards under tensor parallelism).
// `optimizer` is the strategy's standard_optimizer, or else one built as it is.
inline Run train_standard_run(nn::Transformer& model, const parallel::ParallelModel& strategy,
                              const parallel::Mesh& mesh, int microbatches, optim::Optimizer* optimizer = nullptr) {
  const parallel::DataAxes axes = parallel::DataAxes::of(mesh);
  data::BatchLoader loader(arithmetic_dataset(), kBatch, kSeq, axes.batch->rank(), axes.batch->size());
  std::unique_ptr<optim::Optimizer> owned = optimizer ? nullptr : standard_optimizer(strategy);
  if (!optimizer) optimizer = owned.get();
  Run r;
  for (int s = 0; s < kSteps; ++s) {
    const parallel::StepResult step =
        parallel::train_step(model, strategy, *optimizer, loader.next(), microbatches, kLr, 1.0);
    r.grad_norms.push_back(step.grad_norm);
    double loss = step.loss;
    MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, axes.all->comm());
    r.losses.push_back(loss / axes.all->size());
    // Over every rank: the batch ranks see different rows, the pipeline stages different
    // layers; the tensor ranks route the same tokens, so only the first of them counts.
    const double counts = !mesh.has_axis("tensor") || mesh.coord("tensor") == 0 ? 1.0 : 0.0;
    double moe[3] = {counts * step.moe.aux_loss, counts * double(step.moe.layer_forwards),
                     counts * double(step.moe.dropped)};
    MPI_Allreduce(MPI_IN_PLACE, moe, 3, MPI_DOUBLE, MPI_SUM, mesh.comm());
    r.aux_losses.push_back(moe[1] > 0 ? moe[0] / moe[1] : 0.0);
    r.dropped.push_back(static_cast<int64_t>(moe[2]));
  }
  strategy.gather_full_params();
  r.params = snapshot(model);
  strategy.release_full_params();
  return r;
}

// Each step's loss within `loss_tolerance` and gradient norm within 1e-4, relative, of the
// single process's.
inline void check_losses_and_norms(const Run& ref, const Run& got, double loss_tolerance = 1e-4) {
  for (int s = 0; s < kSteps; ++s) {
    CHECK_MESSAGE(std::abs(got.losses[s] - ref.losses[s]) <= loss_tolerance * std::abs(ref.losses[s]),
                  "step " << s << ": loss " << got.losses[s] << " vs single-process " << ref.losses[s]);
    CHECK_MESSAGE(std::abs(got.grad_norms[s] - ref.grad_norms[s]) <= 1e-4 * ref.grad_norms[s],
                  "step " << s << ": gradient norm " << got.grad_norms[s] << " vs single-process " << ref.grad_norms[s]);
    CHECK_MESSAGE(std::abs(got.aux_losses[s] - ref.aux_losses[s]) <= 1e-4 * std::abs(ref.aux_losses[s]),
                  "step " << s << ": MoE aux loss " << got.aux_losses[s] << " vs single-process " << ref.aux_losses[s]);
    CHECK_MESSAGE(got.dropped[s] == ref.dropped[s],
                  "step " << s << ": " << got.dropped[s] << " token choices dropped vs single-process " << ref.dropped[s]);
  }
}

}  // namespace shardlab::testing
