// The compute half of a training step's prediction: the cost model's FLOPs over the
// FLOP/s this rank's GEMMs reach at the model's own shapes, measured at start-up.
//
// The calibrated `local` profile holds the n x n (n = 1024) GEMM's FLOP/s: a peak that a
// model's skinny products (K = D = 256, say) do not reach. So before the first step each
// rank times one training step's matmuls at its own shapes (model_gemm_shapes: the
// Linear layers of a block and the head, cut by the tensor axis, rows of one microbatch;
// cost/calibrate.h's measure_gemm_shapes_flops; tens of milliseconds), the ranks average
// it, and the step's compute is predicted at that rate.
//
//   const double gemm = measure_model_gemm_flops(run, mesh);   // collective
//   const double seconds = predict_compute_seconds(run, mesh, gemm);
#pragma once

#include <vector>

#include "examples/support/run_config.h"
#include "parallel/comm/mesh.h"
#include "parallel/cost/calibrate.h"
#include "parallel/pipeline/pipeline.h"

namespace shardlab::cli {

// One microbatch's matmuls on one rank, each Linear shape with how many a step has.
std::vector<cost::GemmShape> model_gemm_shapes(const RunConfig& run, const parallel::Mesh& mesh);

// Collective over the mesh: the FLOP/s of model_gemm_shapes on this machine, the mean
// over the ranks (all measuring at once, as they will train).
double measure_model_gemm_flops(const RunConfig& run, const parallel::Mesh& mesh);

// Seconds of compute in one training step of `run` on `mesh`, from the cost model at
// `gemm_flops` per rank (0: the calibrated local profile's n x n GEMM peak).
// Communication is predicted from the layout's own plan instead (step_plan.h). Under a
// pipeline, what a rank's compute spans: the schedule's simulated step, with the bubble
// and each activation or gradient message's time on the pipe axis's (emulated) links.
double predict_compute_seconds(const RunConfig& run, const parallel::Mesh& mesh, double gemm_flops = 0,
                               const parallel::PipelineParallel* pipeline = nullptr);

}  // namespace shardlab::cli
