#include "examples/train/run_report.h"

#include "parallel/runtime/compute_prediction.h"
#include "parallel/runtime/compute_probe.h"
#include "parallel/runtime/memory_estimate.h"
#include "parallel/runtime/preemption.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>

#include "framework/error.h"
#include "framework/memory.h"
#include "framework/peak.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/training/train_step.h"

namespace shardlab::cli {

using namespace runtime;  // the runtime whose run this reports

namespace {

void print_memory(const char* when) {
  std::printf("memory per rank (%s): parameters %s | gradients %s | optimizer %s | activations %s | comm buffers %s\n",
              when, format_bytes(MemoryTracker::peak(MemoryCategory::Parameters)).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Gradients)).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Optimizer)).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Activations)).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Communication)).c_str());
}

// What the live bytes were made of when they peaked (each category's own peak, above, may
// fall at another moment): what a memory estimate must add up to.
void print_memory_at_peak() {
  std::printf("memory per rank at its peak (%s): parameters %s | gradients %s | optimizer %s | activations %s | comm "
              "buffers %s\n",
              format_bytes(MemoryTracker::peak_total()).c_str(),
              format_bytes(MemoryTracker::at_peak(MemoryCategory::Parameters)).c_str(),
              format_bytes(MemoryTracker::at_peak(MemoryCategory::Gradients)).c_str(),
              format_bytes(MemoryTracker::at_peak(MemoryCategory::Optimizer)).c_str(),
              format_bytes(MemoryTracker::at_peak(MemoryCategory::Activations)).c_str(),
              format_bytes(MemoryTracker::at_peak(MemoryCategory::Communication)).c_str());
}

// The whole model's parameter count, whatever part of it this rank holds (a deferred
// model costs no memory).
double whole_model_parameters(const nn::ModelConfig& config) {
  return static_cast<double>(nn::deferred_transformer(config)->num_parameters());
}

// The parameters one token uses: all but the E - k experts it is not routed to.
double active_parameters(const nn::ModelConfig& config) {
  nn::DeferParameters defer;
  nn::Transformer model(config);
  double unused = 0;
  for (const auto& block : model.blocks) {
    if (!block->moe) continue;
    for (const auto& [name, p] : block->moe->named_parameters()) {
      if (name.rfind("router.", 0) != 0) unused += static_cast<double>(p.numel());
    }
  }
  const double share = 1.0 - static_cast<double>(config.top_k) / static_cast<double>(std::max<int64_t>(config.experts, 1));
  return static_cast<double>(model.num_parameters()) - share * unused;
}

}  // namespace

RunReport::RunReport(const RunConfig& run, const parallel::Mesh& mesh, const parallel::ParallelModel& parallel,
                     const DataSource& data, const parallel::StepPlan& plan)
    : run_(run), mesh_(mesh), pipeline_(parallel.pipeline()), context_(parallel.context()) {
  const PrecisionScope precision = parallel.compute_scope();  // the compute probe runs as the steps will
  const parallel::DataAxes axes = parallel::DataAxes::of(mesh);
  data_axes_ = axes.all->name();
  // 50 ms per peak: the best of several 10 ms loops, within 3% of a 200 ms measurement on the
  // development machine, and 0.3 s less start-up for every run (the test suite starts
  // hundreds).
  // The bf16 loop only where MFU divides by it (bf16 compute): an fp32 run starts 50 ms sooner.
  // --probe=false: no peak, so no MFU (every rank has the same flags: none measures).
  constexpr double kPeakSeconds = 0.05;
  const bool bf16 = parallel.precision().compute == DType::kBF16;
  std::array<float, 2> peaks{
      run.probe ? static_cast<float>(measure_peak_flops(omp_get_max_threads(), kPeakSeconds)) : 0.0f,
      run.probe && bf16 ? static_cast<float>(measure_peak_bf16_flops(omp_get_max_threads(), kPeakSeconds)) : 0.0f};
  if (run.probe) parallel::all_reduce(mesh.all(), peaks);
  fp32_peak_flops_ = peaks[0];
  bf16_peak_flops_ = peaks[1];
  peak_flops_ = mfu_denominator(bf16, fp32_peak_flops_, bf16_peak_flops_);
  bf16_matmul_ = bf16_matmul_name(parallel.precision().matmul);  // the path measured: what a matmul keeps
  flops_per_token_ = train_flops_per_token(run.model, run.sequence_length());
  tokens_per_step_ = static_cast<double>(run.batch * run.sequence_length());

  // Prediction: compute from the cost model on the calibrated local profile, communication
  // from this layout's own plan of collectives on the mesh's (emulated) links, overlapped.
  bool calibrated = run.probe && cost::hardware("local").calibrated;
  std::string no_prediction = run.probe ? "the local hardware profile is not calibrated; run `shardlab-plan calibrate`"
                                        : "--probe=false";
  double compute = 0.0;
  const ComputeProbe probe = run.probe ? probe_compute(run, mesh) : ComputeProbe{};  // collective: every rank
  MemoryTracker::reset_peaks();  // from here on: the layout's own footprint (the probe's stand-in is gone)
  try {
    if (calibrated) compute = predict_compute_seconds(run, mesh, &probe, pipeline_);
  } catch (const UserError& e) {  // a legal run the cost model cannot price (e.g. an uneven pipeline split)
    calibrated = false;
    no_prediction = "the cost model cannot price this layout: " + std::string(e.what());
  }
  const std::map<std::string, double> comm = parallel::planned_seconds_by_group(mesh, plan);
  const double comm_total = parallel::planned_seconds(mesh, plan);
  for (const char* axis : {parallel::kTensorAxis, parallel::kExpertAxis, parallel::kContextAxis}) {
    if (mesh.splits(axis)) {
      BlockingAxis& a = blocking_.emplace_back();
      a.name = axis;
      a.predicted = comm.contains(axis) ? comm.at(axis) : 0.0;
    }
  }
  double blocking_comm = 0.0;
  std::set<std::string> other_groups;
  for (const auto& [group, seconds] : comm) {
    if (group == parallel::kTensorAxis || group == parallel::kExpertAxis || group == parallel::kContextAxis) {
      blocking_comm += seconds;
    } else {
      planned_other_comm_ += seconds;
      other_groups.insert(group);
    }
  }
  // The step: compute, plus the communication that cannot hide behind it. Tensor and
  // expert collectives sit between a layer's matmuls: all of it. The data axes' traffic
  // overlaps forward (about 1/3 of compute) and backward (2/3; reductions only in the last
  // microbatch's) where the plan says it can, unless --overlap=false (step_plan.h, Hides).
  const double backward = compute * 2.0 / 3.0 / (run.zero == 3 ? 1 : run.grad_accum);
  predicted_exposed_other_ =
      calibrated ? parallel::planned_exposed_seconds(mesh, plan, other_groups, compute / 3.0, backward, run.overlap)
                 : 0.0;
  // Ranks that synchronise wait for the slowest: the probe's rank skew of the compute,
  // seen where the faster ranks wait -- in the blocking collectives, else (a pipeline) in
  // the schedule's compute, else in the data axes' last wait.
  const double skew = calibrated && mesh.size() > 1 ? compute * probe.rank_skew : 0.0;
  if (!blocking_.empty()) {
    blocking_.front().predicted += skew;
    blocking_comm += skew;
  } else if (pipeline_) {
    compute += skew;
  } else {
    predicted_exposed_other_ += skew;
  }
  predicted_step_ = calibrated ? compute + blocking_comm + predicted_exposed_other_ : 0.0;
  predicted_compute_ = calibrated ? compute : 0.0;
  if (!leader()) return;
  std::printf("model   %s | %.2fM parameters", run.model.describe().c_str(), whole_model_parameters(run.model) / 1e6);
  if (run.model.experts > 0) {
    std::printf(" (%.2fM active per token: %lld of %lld experts)", active_parameters(run.model) / 1e6,
                static_cast<long long>(run.model.top_k), static_cast<long long>(run.model.experts));
  }
  std::printf("\n");
  std::printf("data    %s\n", data.train->describe().c_str());
  std::printf("layout  mesh %s | %s", mesh.describe().c_str(), parallel.describe().c_str());
  if (pipeline_) {
    std::printf(" | %s, bubble %.1f%% by the schedule", pipeline_->describe().c_str(),
                100.0 * pipeline_->predicted_bubble());
  }
  std::printf("\n");
  std::printf("batch   %lld sequences x %lld tokens per step (%lld per data rank, %d microbatches) | %d threads per rank\n",
              static_cast<long long>(run.batch), static_cast<long long>(run.sequence_length()),
              static_cast<long long>(run.batch / axes.batch->size()), run.grad_accum, omp_get_max_threads());
  std::printf("dtype   %s\n", parallel.precision().describe().c_str());
  if (peak_flops_ > 0) {
    std::printf("peak    %.1f GFLOP/s fp32 (FMA loop on every rank, summed)", fp32_peak_flops_ / 1e9);
    if (bf16_peak_flops_ > 0) std::printf(", %.1f GFLOP/s bf16 (vdpbf16ps loop)", bf16_peak_flops_ / 1e9);
    std::printf(" | MFU below of the %s peak", peak_flops_ == bf16_peak_flops_ ? "bf16" : "fp32");
  } else {
    std::printf("peak    not measured (--probe=false): no MFU");
  }
  std::printf(" | %.2f MFLOP per token\n", flops_per_token_ / 1e6);
  if (calibrated) {
    std::printf("predict %.1f ms per step: compute %.1f ms (%s, timed now)", predicted_step_ * 1e3, compute * 1e3,
                probe.describe().c_str());
    if (mesh.size() > 1) {
      std::printf(" | rank skew %.1f ms (the slowest rank's probe %+.1f%% of the mean)", skew * 1e3,
                  100.0 * probe.rank_skew);
    }
  } else {
    std::printf("predict (compute: none, %s)", no_prediction.c_str());
  }
  std::printf(" | communication %.2f ms if not overlapped (%zu collectives on %s links x%g", comm_total * 1e3,
              plan.size(), mesh.context().links.profile_name().c_str(), mesh.context().links.link_scale());
  for (const auto& [group, seconds] : comm) std::printf("; %s %.2f ms", group.c_str(), seconds * 1e3);
  std::printf(")\n");
  std::fflush(stdout);
}

const parallel::GroupTotals* RunReport::totals_of(const std::string& group) const {
  for (const parallel::GroupTotals& g : mesh_.context().trace.totals()) {
    if (g.group == group) return &g;
  }
  return nullptr;
}

void RunReport::moe(const nn::MoeStats& mine) {
  const size_t E = static_cast<size_t>(run_.model.experts);
  // Sums over every rank (pipeline stages hold different layers; the batch ranks different
  // rows); the tensor ranks route the same tokens, so only the first of them counts.
  const float counts = !mesh_.has_axis(parallel::kTensorAxis) || mesh_.coord(parallel::kTensorAxis) == 0 ? 1.0f : 0.0f;
  std::vector<float> v = {static_cast<float>(mine.aux_loss), static_cast<float>(mine.z_loss),
                          static_cast<float>(mine.layer_forwards), static_cast<float>(mine.choices),
                          static_cast<float>(mine.dropped)};
  v.resize(5 + E, 0.0f);
  for (size_t e = 0; e < mine.load.size() && e < E; ++e) v[5 + e] = static_cast<float>(mine.load[e]);
  for (float& x : v) x *= counts;
  parallel::all_reduce(mesh_.all(), v);
  moe_ = true;
  aux_loss_ = v[2] > 0 ? v[0] / v[2] : 0.0;
  z_loss_ = v[2] > 0 ? v[1] / v[2] : 0.0;
  dropped_ = v[3] > 0 ? v[4] / v[3] : 0.0;
  double max = 0, sum = 0;
  for (size_t e = 0; e < E; ++e) max = std::max<double>(max, v[5 + e]), sum += v[5 + e];
  load_imbalance_ = sum > 0 ? max / (sum / static_cast<double>(E)) : 0.0;
}

void RunReport::step(int64_t step, double loss, double lr, double grad_norm, double seconds, double exposed_comm,
                     MetricsLog& metrics) {
  if (first_step_ < 0) first_step_ = step - 1;
  // Tensor and expert parallelism's collectives block inside forward and backward: all exposed.
  double blocked = 0;
  for (BlockingAxis& a : blocking_) {
    const parallel::GroupTotals* g = totals_of(a.name);
    const bool ring = a.name == parallel::kContextAxis && context_;  // overlapped: count only the waits
    const double total = ring ? context_->times().exposed_comm_seconds : g ? g->measured : 0.0;
    const double bytes = g ? static_cast<double>(g->bytes) : 0.0;
    a.last = total - a.seen;
    a.seen = total;
    a.last_bytes = bytes - a.bytes_seen;
    a.bytes_seen = bytes;
    a.sum += a.last;
    a.history.push_back(a.last);
    blocked += a.last;
  }
  step_history_.push_back(seconds);
  compute_history_.push_back(seconds - exposed_comm - blocked);
  exposed_history_.push_back(exposed_comm);
  elapsed_ += seconds;
  compute_sum_ += seconds - exposed_comm - blocked;
  step_sum_ += seconds;
  comm_sum_ += exposed_comm;
  ++window_;
  const double tokens_per_s = tokens_per_step_ / seconds;
  metrics.add("step", double(step));
  metrics.add("loss", loss);
  metrics.add("lr", lr);
  metrics.add("grad_norm", grad_norm);
  metrics.add("step_s", seconds);
  metrics.add("compute_s", seconds - exposed_comm - blocked);
  metrics.add("exposed_comm_s", exposed_comm);
  if (predicted_step_ > 0) {
    metrics.add("compute_predicted_s", predicted_compute_);
    metrics.add("exposed_comm_predicted_s", predicted_exposed_other_);
  }
  for (const BlockingAxis& a : blocking_) {
    metrics.add(a.name + "_comm_s", a.last);
    metrics.add(a.name + "_comm_bytes", a.last_bytes);
    metrics.add(a.name + "_comm_predicted_s", a.predicted);
  }
  if (moe_) {
    metrics.add("moe_aux_loss", aux_loss_);
    metrics.add("moe_z_loss", z_loss_);
    metrics.add("moe_dropped_fraction", dropped_);
    metrics.add("moe_load_max_over_mean", load_imbalance_);
  }
  if (pipeline_) {
    metrics.add("pipeline_bubble", pipeline_->bubble());
    metrics.add("pipeline_bubble_predicted", pipeline_->predicted_bubble());
    bubble_sum_ += pipeline_->bubble();
  }
  metrics.add("tokens_per_s", tokens_per_s);
  if (peak_flops_ > 0) metrics.add("mfu", tokens_per_s * flops_per_token_ / peak_flops_);
  if (predicted_step_ > 0) metrics.add("step_predicted_s", predicted_step_);
  if (context_ && step == run_.steps) gather_context_times(step - first_step_);
  if (step == 1) {  // the first step has allocated everything a step needs
    step_peak_bytes_ = static_cast<double>(MemoryTracker::peak_total());  // before any evaluation
    if (leader()) print_memory("peak during step 1");
    if (leader()) print_memory_at_peak();
    if (pipeline_) print_stage_activations();
  }
  if (!leader() || (step % run_.log_every != 0 && step != run_.steps)) return;
  const double eta = elapsed_ / double(step - first_step_) * double(run_.steps - step);
  // Every figure on the line is over the same window: the steps since the last line.
  const double window_tokens_per_s = tokens_per_step_ * window_ / step_sum_;
  std::printf("step %5lld/%lld | loss %.4f | lr %.2e | norm %.3f | %7.0f tokens/s", static_cast<long long>(step),
              static_cast<long long>(run_.steps), loss, lr, grad_norm, window_tokens_per_s);
  if (peak_flops_ > 0) {
    const double window_mfu = window_tokens_per_s * flops_per_token_ / peak_flops_;
    std::printf(" | MFU %4.1f%%%s", 100.0 * window_mfu, window_mfu > 1.0 ? " (of a start-up peak measured under load)" : "");
  }
  std::printf(" | compute %.1f ms + exposed comm (%s) %.1f ms", 1e3 * compute_sum_ / window_, data_axes_.c_str(),
              1e3 * comm_sum_ / window_);
  for (BlockingAxis& a : blocking_) {
    std::printf(a.name == parallel::kContextAxis ? " + comm (%s) waits %.1f ms (of %.1f ms planned)"
                                                 : " + comm (%s) %.1f ms (predicted %.1f ms)",
                a.name.c_str(), 1e3 * a.sum / window_, 1e3 * a.predicted);
    a.sum = 0;
  }
  // The whole step, over the same window, beside the cost model's prediction for it.
  std::printf(" | step %.1f ms", 1e3 * step_sum_ / window_);
  if (predicted_step_ > 0) std::printf(" (predicted %.1f ms)", predicted_step_ * 1e3);
  if (pipeline_) {
    std::printf(" | bubble %.1f%% (predicted %.1f%%)", 100.0 * bubble_sum_ / window_,
                100.0 * pipeline_->predicted_bubble());
  }
  if (moe_) {
    std::printf(" | MoE aux %.3f, dropped %.1f%%, expert load max/mean %.2f", aux_loss_, 100.0 * dropped_,
                load_imbalance_);
  }
  std::printf(" | ETA %s\n", format_duration(eta).c_str());
  std::fflush(stdout);
  compute_sum_ = comm_sum_ = bubble_sum_ = step_sum_ = 0;
  window_ = 0;
}

void RunReport::print_stage_activations() const {
  const parallel::AxisGroup& pipe = mesh_.axis(parallel::kPipeAxis);
  const float mine = static_cast<float>(MemoryTracker::peak(MemoryCategory::Activations));
  std::vector<float> peaks(pipe.size());
  parallel::all_gather(pipe, {&mine, 1}, peaks);
  if (!leader()) return;
  std::printf("activations per pipe rank (peak during step 1; microbatches in flight by the schedule):");
  for (int r = 0; r < pipe.size(); ++r) {
    std::printf(" %s%s (%d)", r ? "| " : "", format_bytes(static_cast<int64_t>(peaks[r])).c_str(),
                pipeline_->prediction().peak_in_flight[r]);
  }
  std::printf("\n");
}

void RunReport::eval(int64_t step, const EvalResult& e, MetricsLog& metrics) {
  metrics.add("eval_loss", e.loss);
  if (e.accuracy >= 0) metrics.add("eval_accuracy", e.accuracy);
  if (!leader()) return;
  std::printf("eval  step %lld | held-out loss %.4f", static_cast<long long>(step), e.loss);
  if (e.accuracy >= 0) std::printf(" | answer exact-match %.1f%%", 100 * e.accuracy);
  std::printf("\n");
  std::fflush(stdout);
}

void RunReport::saved(const std::string& path, double blocked_seconds) {
  save_blocked_.push_back(blocked_seconds);
  if (!leader()) return;
  // Under --ckpt-async the file is not on disk yet: a failed write is raised later.
  std::printf("%s %s (the loop blocked %.1f ms)\n", run_.ckpt_async ? "writing in the background" : "saved",
              path.c_str(), 1e3 * blocked_seconds);
  std::fflush(stdout);
}

void RunReport::initialised(const std::string& source) {
  if (leader()) std::printf("weights from %s; step 0, fresh optimizer state\n", source.c_str());
}

void RunReport::resumed(const std::string& path, int64_t step) {
  if (leader()) std::printf("resumed from %s at step %lld\n", path.c_str(), static_cast<long long>(step));
}

void RunReport::preempted(const std::string& by, int64_t step) {
  if (!leader()) return;
  std::printf("preempted by %s: stopped after step %lld with its checkpoint saved; exit %d, resume with --resume "
              "latest\n", by.c_str(), static_cast<long long>(step), runtime::kPreemptedExitCode);
  std::fflush(stdout);
}

void RunReport::wrote_gradients(const std::string& path) {
  if (leader()) std::printf("gradients of this step (averaged, before clipping) written to %s\n", path.c_str());
}

void RunReport::wrote_trace(const std::string& path) {
  if (leader()) std::printf("trace of every rank's compute and collectives written to %s (open it in ui.perfetto.dev)\n", path.c_str());
}

namespace {

// The median of `v` without its first two entries (oneDNN primitive creation and first-touch
// page faults make the first steps slow, as the benchmarks leave them out too).
double steady_median(std::vector<double> v) {
  v.erase(v.begin(), v.begin() + std::min<size_t>(2, v.size()));
  return median(std::move(v));
}

void print_component(const char* name, double measured, double predicted) {
  std::printf("  %-26s %9.2f ms   predicted %9.2f ms   error %+6.1f%%\n", name, 1e3 * measured, 1e3 * predicted,
              predicted > 0 ? 100.0 * (measured / predicted - 1.0) : 0.0);
}

}  // namespace

void RunReport::print_prediction_error() const {
  if (predicted_step_ <= 0 || step_history_.size() < 3) return;
  std::printf("prediction vs measured, medians of this run's steps from its third (error = measured / predicted - 1):\n");
  print_component("step", steady_median(step_history_), predicted_step_);
  print_component("compute", steady_median(compute_history_), predicted_compute_);
  for (const BlockingAxis& a : blocking_) {
    if (a.name == parallel::kContextAxis) {  // overlapped with attention: its waits, beside the plan's total
      std::printf("  %-26s %9.2f ms   of the plan's %.2f ms if none overlapped (attention hides the rest)\n",
                  "comm context (waits)", 1e3 * steady_median(a.history), 1e3 * a.predicted);
      continue;
    }
    const std::string name = "comm " + a.name + " (all exposed)";
    print_component(name.c_str(), steady_median(a.history), a.predicted);
  }
  if (mesh_.size() > 1 && planned_other_comm_ > 0) {
    const std::string name = "comm " + data_axes_ + " (exposed)";
    print_component(name.c_str(), steady_median(exposed_history_), predicted_exposed_other_);
    std::printf("  %-26s (its collectives take %.2f ms by the plan if none overlapped)\n", "", 1e3 * planned_other_comm_);
  }
}

void RunReport::gather_context_times(int64_t steps) {
  const parallel::AxisGroup& axis = mesh_.axis(parallel::kContextAxis);
  const parallel::ContextTimes& t = context_->times();
  // The maxima, and the minimum of the compute as the maximum of its negation.
  float v[3] = {static_cast<float>(t.compute_seconds / steps), static_cast<float>(t.exposed_comm_seconds / steps),
                static_cast<float>(-t.compute_seconds / steps)};
  parallel::all_reduce(axis, v, parallel::ReduceOp::kMax);
  cp_compute_max_ = v[0];
  cp_exposed_max_ = v[1];
  cp_compute_min_ = -v[2];
}

void RunReport::finish() {
  if (!leader()) return;
  print_memory("peak over the run");
  // The estimate for rank 0 (the first pipeline stage, with the schedule's microbatches in
  // flight) beside the tracker's peak of live bytes during the first training step
  // (evaluation batches, which may be larger, come later).
  runtime::RunConfig resolved = run_;  // the bf16 matmul path this run measured, where it said auto
  if (resolved.precision == "bf16") resolved.bf16_matmul = bf16_matmul_;
  const MemoryEstimate e = estimate_rank_memory(resolved, resolved.layout());
  const double measured = step_peak_bytes_ > 0 ? step_peak_bytes_ : static_cast<double>(MemoryTracker::peak_total());
  std::printf("memory per rank predicted: parameters %s | gradients %s | optimizer %s | activations %s "
              "| total %s against a peak of %s measured in step 1 (%s in communication buffers), error %+.1f%%\n",
              format_bytes(static_cast<int64_t>(e.params)).c_str(),
              (format_bytes(static_cast<int64_t>(e.grads)) +
               (e.feedback > 0 ? " + " + format_bytes(static_cast<int64_t>(e.feedback)) + " error feedback" : ""))
                  .c_str(),
              format_bytes(static_cast<int64_t>(e.optimizer)).c_str(),
              format_bytes(static_cast<int64_t>(e.activations)).c_str(),
              format_bytes(static_cast<int64_t>(e.total())).c_str(), format_bytes(static_cast<int64_t>(measured)).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Communication)).c_str(),
              e.total() > 0 ? 100.0 * (measured / e.total() - 1.0) : 0.0);
  if (mesh_.size() > 1) std::printf("communication of rank 0:\n%s", mesh_.context().trace.format_summary().c_str());
  if (context_ && cp_compute_min_ > 0) {
    std::printf("context attention per step on the context axis: compute %.2f ms on the slowest rank, %.2f ms on the "
                "fastest (max/min %.3f, %s) | exposed %s communication %.2f ms at most (%.1f%% of the slowest "
                "attention compute)\n",
                1e3 * cp_compute_max_, 1e3 * cp_compute_min_, cp_compute_max_ / cp_compute_min_,
                context_->config().load_balance ? "head-tail balanced" : "contiguous chunks",
                parallel::context_comm_name(context_->config().comm), 1e3 * cp_exposed_max_,
                100.0 * cp_exposed_max_ / cp_compute_max_);
  }
  print_prediction_error();
  print_save_blocking();
  std::fflush(stdout);
}

void RunReport::print_save_blocking() const {
  if (save_blocked_.empty() || step_history_.size() < 3) return;
  const double step = steady_median(step_history_);
  const double blocked = median(save_blocked_);  // every save: a wait for the previous write counts
  const double longest = *std::max_element(save_blocked_.begin(), save_blocked_.end());
  std::printf("checkpoint saves (%s): the loop blocked %.1f ms per save (median of %zu, longest %.1f ms), %.1f%% of "
              "the median step %.1f ms\n", run_.ckpt_async ? "--ckpt-async" : "synchronous", 1e3 * blocked,
              save_blocked_.size(), 1e3 * longest, 100.0 * blocked / step, 1e3 * step);
}

}  // namespace shardlab::cli
