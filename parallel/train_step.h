// One optimizer step of a parallelised model, written once for every program that trains
// (train_gpt, the tests, the benchmarks), and reading as llm.c's loop: for each of k
// microbatches forward and backward of its mean loss scaled by 1/k (gradients are
// communicated only during the last), then finish the gradients, clip, optimizer step,
// zero. With a pipeline the schedule runs the k microbatches' forward and backward passes
// instead, and the gradients are reduced once it has finished.
//
//   ParallelModel parallel = parallelize(model, mesh, config);
//   auto optimizer = optim::make_optimizer({.name = "adamw"}, parallel.parameters());
//   const StepResult r = train_step(model, parallel, *optimizer, loader.next(), k, schedule.lr(step), 1.0);
#pragma once

#include <functional>

#include "framework/data/dataset.h"
#include "framework/nn/transformer.h"
#include "optim/optimizer.h"
#include "parallel/comm/comm_trace.h"
#include "parallel/parallel_model.h"

namespace shardlab::parallel {

struct StepResult {
  double loss = 0.0;       // mean over this rank's microbatches (its tokens of the global batch), on every pipe rank
  double grad_norm = 0.0;  // global gradient norm before clipping
  nn::MoeStats moe;        // this rank's MoE layers over the step's microbatches (nn/moe.h)
  bool updated = true;     // false: before_update dropped the update
};

// `batch` is this rank's rows of the global batch, whole sequences: under context
// parallelism the step keeps this rank's positions of each (ParallelModel::sequence_slice).
// With a trace, each microbatch's
// forward and backward is a span on its compute lane.
// `optimizer` is built over parallel.parameters(). `gradients_ready`, where given, runs on
// every rank once the gradients are final (averaged over the data ranks, not yet clipped),
// before the update: a collective there sees the same point of the step everywhere.
// `before_update`, where given, runs on every rank after the gradient norm, with the
// step's result so far (loss, grad_norm); false drops the update -- the weights, the
// optimizer's state and its step count stay as they were, every ZeRO stage alike (the
// update is local to each rank's slice; finish_step re-gathers unchanged slices). It must
// return the same on every rank: decide it with a collective (runtime::StepGuard).
StepResult train_step(nn::Transformer& model, const ParallelModel& parallel, optim::Optimizer& optimizer,
                      const data::Batch& batch, int microbatches, float lr, double max_norm, CommTrace* trace = nullptr,
                      const std::function<void()>& gradients_ready = {},
                      const std::function<bool(const StepResult&)>& before_update = {});

}  // namespace shardlab::parallel
