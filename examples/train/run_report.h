// RunReport: what train_gpt tells its user, printed by rank 0, every number measured and
// labelled.
//
// At start: model, data, layout, batch, the FMA peak measured on every rank (summed: the
// MFU denominator), and the prediction of one step: compute from the cost model on the
// calibrated `local` profile, communication from the layout's plan of collectives
// (step_plan.h) on the mesh's links, per group. Each logged step: loss of the whole
// global batch, and over the window since the previous line tokens/s of the whole job,
// MFU, and the step time split into compute and exposed (not overlapped) communication
// per axis, and with a pipeline its measured bubble next to the schedule's prediction. At the end: per-rank tensor
// memory by category and the per-axis communication summary (count, bytes, measured and
// predicted seconds, bus bandwidth), and each component's median time beside its
// prediction with the error (step, compute, each axis's communication).
#pragma once

#include <string>
#include <vector>

#include "parallel/runtime/data_source.h"
#include "parallel/runtime/evaluate.h"
#include "parallel/runtime/metrics.h"
#include "parallel/runtime/run_config.h"
#include "framework/nn/transformer.h"
#include "parallel/parallelize.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"

namespace shardlab::cli {

class RunReport {
 public:
  // Collective: measures the peak on every rank. `plan` is the step's collectives
  // (plan_train_step), whose predicted times on the mesh's links it prints.
  RunReport(const runtime::RunConfig& run, const parallel::Mesh& mesh, const parallel::ParallelModel& parallel,
            const runtime::DataSource& data, const parallel::StepPlan& plan);

  // Collective over the mesh, before step(): the MoE layers' statistics of this rank,
  // summed over every rank for the step's line and JSONL row.
  void moe(const nn::MoeStats& mine);
  void step(int64_t step, double loss, double lr, double grad_norm, double seconds, double exposed_comm,
            runtime::MetricsLog& metrics);
  void eval(int64_t step, const runtime::EvalResult& result, runtime::MetricsLog& metrics);
  // `blocked_seconds`: how long the save held the training loop (Checkpointer::save).
  void saved(const std::string& path, double blocked_seconds);
  void resumed(const std::string& path, int64_t step);
  void initialised(const std::string& source);  // --init-from
  void preempted(const std::string& by, int64_t step);
  void wrote_trace(const std::string& path);
  void wrote_gradients(const std::string& path);
  void finish();

 private:
  bool leader() const { return mesh_.rank() == 0; }
  // An axis whose collectives block inside forward and backward (tensor, expert): its
  // measured seconds per step next to the plan's prediction. The context axis's ring
  // overlaps attention: its seconds are the waits the attention measured (ContextTimes).
  struct BlockingAxis {
    std::string name;
    double predicted = 0;  // seconds per step, from the plan
    double seen = 0;       // measured seconds up to the last step
    double sum = 0;        // over the current window
    double last = 0;       // the last step's
    double bytes_seen = 0, last_bytes = 0;  // bytes sent: up to the last step, in it
    std::vector<double> history;            // each step's seconds, for the final summary
  };
  void print_prediction_error() const;  // finish(): each component's median beside its prediction
  void print_save_blocking() const;     // finish(): the saves' median blocking beside the median step
  const parallel::GroupTotals* totals_of(const std::string& group) const;  // the trace's, or nullptr
  void print_stage_activations() const;   // collective over pipe: each rank's peak activations

  const runtime::RunConfig& run_;
  std::string bf16_matmul_;  // the policy's bf16 matmul path, "native" or "rounded"
  const parallel::Mesh& mesh_;
  const parallel::PipelineParallel* pipeline_;
  const parallel::ContextParallel* context_;
  // Context axis, at the last step: each rank's attention compute and exposed ring
  // communication per step, slowest and fastest rank of the axis.
  double cp_compute_max_ = 0, cp_compute_min_ = 0, cp_exposed_max_ = 0;
  void gather_context_times(int64_t steps);
  std::string data_axes_;
  double peak_flops_ = 0;          // sum over ranks: the MFU denominator, the peak of the run's compute dtype
  double fp32_peak_flops_ = 0;     // sum over ranks, measured
  double bf16_peak_flops_ = 0;     // sum over ranks, measured under bf16 compute; 0 without avx512_bf16
  double step_peak_bytes_ = 0;     // live bytes at their peak during step 1 (the memory tracker's)
  double flops_per_token_ = 0;
  double tokens_per_step_ = 0;
  double predicted_step_ = 0;      // seconds, 0 when the local profile is not calibrated
  double predicted_compute_ = 0;   // seconds, the cost model's (calibrated local profile)
  double planned_other_comm_ = 0;  // seconds of the data/fsdp/pipe groups' collectives, not overlapped
  double predicted_exposed_other_ = 0;  // seconds of them left exposed by the prediction
  std::vector<double> step_history_, compute_history_, exposed_history_;  // per step, seconds
  std::vector<double> save_blocked_;  // per checkpoint save, seconds the loop waited
  double elapsed_ = 0;
  int64_t first_step_ = -1;
  double compute_sum_ = 0, comm_sum_ = 0, step_sum_ = 0;
  std::vector<BlockingAxis> blocking_;
  // The last step's MoE figures (moe()): load-balancing and z losses per layer forward,
  // the fraction of token choices dropped, the busiest expert's load over the mean.
  bool moe_ = false;
  double aux_loss_ = 0, z_loss_ = 0, dropped_ = 0, load_imbalance_ = 0;
  double bubble_sum_ = 0;
  int64_t window_ = 0;
};

}  // namespace shardlab::cli
