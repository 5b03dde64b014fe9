#include "parallel/runtime/dry_run.h"

#include <algorithm>
#include <optional>
#include <cstdio>
#include <string>

#include "parallel/comm/comm_context.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/parallelize.h"
#include "parallel/runtime/compute_prediction.h"
#include "parallel/runtime/memory_estimate.h"
#include "parallel/runtime/metrics.h"

namespace shardlab::runtime {

parallel::StepPlan plan_train_step(const RunConfig& run, const parallel::Mesh& mesh, nn::Transformer& model) {
  parallel::StepPlan plan = parallel::plan_step(model, mesh, run.parallel(),
                                                     {.batch = run.batch, .seq_len = run.sequence_length(),
                                                      .microbatches = run.grad_accum});
  const std::string& all = parallel::DataAxes::of(mesh).all->name();
  parallel::add_planned(plan, mesh, {all, parallel::CollectiveOp::kAllReduce, parallel::kBytesPerFloat, "loss"});
  return plan;
}

void dry_run(const RunConfig& run, const parallel::Mesh& mesh, nn::Transformer& model) {
  const parallel::DataAxes axes = parallel::DataAxes::of(mesh);
  const parallel::StepPlan plan = plan_train_step(run, mesh, model);
  parallel::check_plan_agreement(mesh, plan);
  if (mesh.rank() != 0) return;
  const double tokens = static_cast<double>(run.batch * run.sequence_length());
  std::printf("dry run: %s | %.2fM parameters | mesh %s | ZeRO-%d | %lld x %lld tokens per step, %d microbatches\n",
              run.model.describe().c_str(), model.num_parameters() / 1e6, mesh.describe().c_str(), run.zero,
              static_cast<long long>(run.batch), static_cast<long long>(run.sequence_length()), run.grad_accum);
  const parallel::PipelineConfig pp = run.parallel().pipeline;
  const bool pipelined = mesh.splits(parallel::kPipeAxis);
  std::optional<parallel::PipelineSchedule> schedule;
  std::optional<parallel::ScheduleCheck> check;
  if (pipelined) {
    schedule = parallel::make_pipeline_schedule(pp.schedule, mesh.axis_size(parallel::kPipeAxis), pp.virtual_stages,
                                                pp.microbatches);
    check = parallel::check(*schedule);
  }
  const MemoryEstimate memory = estimate_rank_memory(run, run.layout());
  std::printf("memory of rank 0 at its peak %.2f MiB: parameters %.2f, gradients %.2f, AdamW state %.2f, activations "
              "%.2f (what shardlab's autograd keeps, cost/model/autograd_activations.h), gathered parameters %.2f\n",
              memory.total() / (1 << 20), memory.params / (1 << 20), memory.grads / (1 << 20),
              memory.optimizer / (1 << 20), memory.activations / (1 << 20), memory.buffers / (1 << 20));
  std::printf("the collectives of one step on rank 0; all %d ranks plan the same on every group they share\n",
              mesh.size());
  std::printf("%s", parallel::format_plan(mesh, plan).c_str());
  if (pipelined) {
    const parallel::ParallelConfig config = run.parallel();
    const int64_t message = parallel::pipeline_message_bytes(
        run.model, mesh, config, {.batch = run.batch, .seq_len = run.sequence_length(), .microbatches = run.grad_accum});
    std::printf("pipeline %s over pipe=%d, %d microbatches: every send meets its receive, no deadlock; bubble %.1f%% "
                "(the book's closed form %.1f%%), at most %d microbatches in flight on a rank; each activation and "
                "gradient message %lld bytes (%s)\n",
                parallel::to_string(pp.schedule).c_str(), schedule->ranks, schedule->microbatches, 100 * check->bubble,
                100 * parallel::predicted_bubble(pp.schedule, schedule->ranks, pp.virtual_stages, pp.microbatches),
                *std::max_element(check->peak_in_flight.begin(), check->peak_in_flight.end()),
                static_cast<long long>(message), dtype_name(config.precision.activation));
    std::printf("%s", parallel::render_timeline(*schedule, *check).c_str());
  }
  const double comm = parallel::planned_seconds(mesh, plan);
  std::printf("predict %.3f ms of communication per step if none of it overlapped (%s links x%g), %.1f GFLOP of "
              "compute per rank",
              comm * 1e3, mesh.context().links.profile_name().c_str(), mesh.context().links.link_scale(),
              train_flops_per_token(run.model, run.sequence_length()) * tokens / axes.all->size() / 1e9);
  if (cost::hardware("local").calibrated) {
    std::printf(" = %.1f ms on the local profile", predict_compute_seconds(run, mesh) * 1e3);
  } else {
    std::printf(" (calibrate the local profile for its time: shardlab-plan calibrate)");
  }
  std::printf("\n");
}

}  // namespace shardlab::runtime
