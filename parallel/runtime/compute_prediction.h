// The compute half of a training step's prediction.
//
// With a start-up probe (compute_probe.h: one period of this rank's blocks and its head,
// timed forward and backward on one microbatch), compute is the probe scaled to this
// rank's blocks and microbatches, plus the optimizer's pass at the calibrated memory
// bandwidth. Without one (--dry-run, which builds no model), it is the cost model's FLOPs
// at the calibrated GEMM peak plus the element-wise work a FLOP count misses at the
// calibrated memory bandwidth. Under a pipeline, what a rank's compute spans is the
// schedule's simulated step, with the bubble and each activation or gradient message's
// time on the pipe axis's (emulated) links.
//
//   const ComputeProbe probe = probe_compute(run, mesh);          // collective
//   const double seconds = predict_compute_seconds(run, mesh, &probe, pipeline);
#pragma once

#include "parallel/runtime/compute_probe.h"
#include "parallel/runtime/run_config.h"
#include "parallel/comm/mesh.h"
#include "parallel/pipeline/pipeline.h"

namespace shardlab::runtime {

// Seconds of compute in one training step of `run` on `mesh`. Communication is predicted
// from the layout's own plan instead (step_plan.h).
double predict_compute_seconds(const RunConfig& run, const parallel::Mesh& mesh, const ComputeProbe* probe = nullptr,
                               const parallel::PipelineParallel* pipeline = nullptr);
// The same for one rank of `layout` before any mesh exists (the planner's --probe): a
// pipeline's `schedule`, if any, with each activation or gradient message taking
// `message_seconds`.
double predict_compute_seconds(const RunConfig& run, const parallel::Layout& layout, const ComputeProbe* probe,
                               const parallel::PipelineSchedule* schedule = nullptr, double message_seconds = 0);

}  // namespace shardlab::runtime
