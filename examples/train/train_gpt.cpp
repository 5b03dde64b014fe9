// train_gpt: the main job. Trains a GPT-2 or LLaMA-style model on the embedded arithmetic
// task (or a text file / llm.c shard), on one process or many, and reports measured speed
// against the measured peak and the cost model's prediction.
//
//   train_gpt                                           # gpt-arith on arithmetic, one process
//   mpirun -n 4 train_gpt --mesh data=4 --zero 3        # the same model, ZeRO-3 over 4 ranks
//   train_gpt --resume runs/ckpt_000100.h5              # continues bit for bit, in any layout
//   train_gpt --init-from hf/gpt2                       # fine-tunes a Hugging Face model (docs/models.md)
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include "examples/train/run_flags.h"
#include "examples/train/run_report.h"
#include "framework/error.h"
#include "optim/gradient_record.h"
#include "optim/schedule.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/link_emulation.h"
#include "parallel/runtime/async_checkpoint.h"
#include "parallel/runtime/data_source.h"
#include "parallel/runtime/dry_run.h"
#include "parallel/runtime/evaluate.h"
#include "parallel/runtime/init_from.h"
#include "parallel/runtime/local_profile.h"
#include "parallel/runtime/memory_estimate.h"
#include "parallel/runtime/metrics.h"
#include "parallel/runtime/precision_choice.h"
#include "parallel/runtime/preemption.h"
#include "parallel/runtime/step_guard.h"
#include "parallel/runtime/training_state.h"
#include "parallel/train_step.h"

using namespace shardlab;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int train(int argc, char** argv) {
  // SIGTERM, SIGINT, SIGUSR1: save at the next step boundary, then exit kPreemptedExitCode.
  const runtime::PreemptionSignals signals;
  const runtime::RunConfig flags = cli::parse_run_config(argc, argv);
  if (flags.help) return std::printf("%s\n", flags.help_text.c_str()), 0;
  if (flags.threads > 0) omp_set_num_threads(flags.threads);
  // The first collective: ranks started with different flags stop here, not in a hang.
  parallel::check_same_configuration(MPI_COMM_WORLD, flags.flags);  // --config files expanded
  // --precision auto (the default) becomes bf16 where every rank's CPU runs bf16 matmuls
  // natively faster, fp32 elsewhere: measured, agreed, validated again.
  const runtime::RunConfig run = runtime::resolve_precision(flags, MPI_COMM_WORLD);

  // Every rank validates the same layout against the model and batch before the first collective.
  const parallel::Layout layout = run.layout();
  layout.validate(run.layout_checks(), parallel::Comm::borrowed(MPI_COMM_WORLD).size());
  if (!run.dry_run) runtime::check_fits_in_memory(run, layout);
  parallel::Mesh mesh(MPI_COMM_WORLD, layout.axes);
  if (!run.dry_run) runtime::prepare_output_paths(run, mesh.comm());
  runtime::ensure_local_profile(mesh, stdout);  // predictions need this machine measured
  parallel::configure_link_emulation(mesh, run.link_profile, run.link_mode, run.link_scale);
  mesh.context().watchdog.set_timeout(run.watchdog_timeout(0));
  mesh.context().trace.set_recording(!run.trace.empty());
  if (!run.trace.empty()) mesh.context().trace.align_clocks(mesh.comm());  // hosts' clocks differ
  const parallel::DataAxes axes = parallel::DataAxes::of(mesh);
  const runtime::DataSource data = runtime::open_data(run);
  data::BatchLoader loader(data.train, run.batch, run.sequence_length(), axes.batch->rank(), axes.batch->size());
  // Built without storage; the layout allocates and initialises what each rank keeps
  // (ZeRO-3: only its slice), from the same seed whatever the layout.
  const auto owned = nn::deferred_transformer(run.model);
  nn::Transformer& model = *owned;
  if (run.dry_run) return runtime::dry_run(run, mesh, model), 0;
  // Ranks that would issue different collectives stop here, not in a hang (step_plan.h).
  const parallel::StepPlan plan = runtime::plan_train_step(run, mesh, model);
  parallel::check_plan_agreement(mesh, plan);
  parallel::ParallelConfig config = run.parallel();
  config.precision = runtime::choose_precision(run, mesh);  // collective under bf16: the matmul path all ranks take
  const std::string resume = run.resume.empty() ? "" : runtime::resolve_resume(run.resume, run.ckpt_dir);
  const parallel::ParallelModel parallel_model = [&] {
    std::optional<nn::WeightsLoadedNext> loading;  // a resume reads every weight: no seeding first
    if (!resume.empty()) loading.emplace();
    return parallel::parallelize(model, mesh, config);
  }();
  // Built outside the strategy, over the parameter elements this rank updates.
  const auto optimizer = optim::make_optimizer(run.optimizer_config(), parallel_model.parameters());
  const optim::WarmupCosine schedule(run.lr, run.min_lr, run.warmup_steps(), run.steps);
  runtime::TrainState state;
  if (!resume.empty()) {
    runtime::check_data_order(resume, run);  // position, seed and shuffle: the whole data order
    state = runtime::load_checkpoint(resume, parallel_model, *optimizer, run.model);
    if (state.step >= run.steps) {
      throw UserError("checkpoint " + resume + " is at step " + std::to_string(state.step) + ", already at --steps " +
                      std::to_string(run.steps) + "; raise --steps to train further");
    }
    loader.set_position(state.data_position);
  }
  if (!run.init_from.empty()) runtime::init_from(run.init_from, parallel_model, run.model);  // weights only, step 0
  cli::RunReport report(run, mesh, parallel_model, data, plan);  // prints on rank 0 only
  if (!resume.empty()) report.resumed(resume, state.step);
  if (!run.init_from.empty()) report.initialised(run.init_from);
  runtime::MetricsLog metrics(mesh.rank() == 0 ? run.metrics : "", state.step);

  std::string last_checkpoint = resume;  // named when the run diverges
  runtime::Checkpointer checkpoints(mesh, parallel_model, run);  // --ckpt-async: written by a background thread
  const auto save = [&](int64_t step) {
    last_checkpoint = runtime::checkpoint_path(run.ckpt_dir, step);
    report.saved(last_checkpoint, checkpoints.save(last_checkpoint, *optimizer, state));
  };
  if (run.save_step0 && resume.empty()) save(0);
  runtime::StepGuard guard(mesh, run, signals);  // non-finite steps and signals, agreed by every rank
  const int64_t first_step = state.step;
  for (int64_t step = state.step; step < run.steps; ++step) {
    const auto t0 = Clock::now();
    const double comm0 = parallel_model.exposed_comm_seconds();
    const data::Batch batch = loader.next();  // this rank's rows of the global batch
    const float lr = schedule.lr(step);
    // --dump-grads: the first step's final gradients, saved before the update changes the
    // weights they belong to (not counted in the step's time).
    double dump_seconds = 0;
    const auto dump_gradients = [&] {
      const auto d0 = Clock::now();
      checkpoints.wait();  // HDF5 is not thread-safe: no background write while this one runs
      optim::GradientRecord record(parallel_model.parameters());
      record.step(0.0f);
      runtime::save_checkpoint(run.dump_grads, mesh, parallel_model, record, {step, loader.position()}, run);
      report.wrote_gradients(run.dump_grads);
      dump_seconds = seconds_since(d0);
    };
    // forward, backward (gradients sync in the last microbatch), finish, clip, agree, step
    const parallel::StepResult r = parallel::train_step(
        model, parallel_model, *optimizer, batch, run.grad_accum, lr, run.grad_clip, &mesh.context().trace,
        step == first_step && !run.dump_grads.empty() ? dump_gradients : std::function<void()>{},
        [&](const parallel::StepResult& s) { return guard.agree(step + 1, s.loss, s.grad_norm); });
    float loss = static_cast<float>(r.loss);
    parallel::all_reduce(*axes.all, {&loss, 1});  // log the loss of the whole global batch
    state = {step + 1, loader.position()};
    const double seconds = seconds_since(t0) - dump_seconds;
    if (run.model.experts > 0) report.moe(r.moe);
    report.step(state.step, loss / axes.all->size(), lr, r.grad_norm, seconds, parallel_model.exposed_comm_seconds() - comm0,
                metrics);
    if (step == first_step) mesh.context().watchdog.set_timeout(run.watchdog_timeout(seconds));

    const bool last = state.step == run.steps;
    if ((run.eval_every > 0 && state.step % run.eval_every == 0) || last) {
      parallel_model.gather_full_params();
      const PrecisionScope precision = parallel_model.compute_scope();
      report.eval(state.step, runtime::evaluate(model, data, run), metrics);
      parallel_model.release_full_params();
    }
    // The step's row is on disk before its checkpoint: a job killed in between resumes from
    // the previous checkpoint and rewrites the row, one killed after has both.
    metrics.flush_row();
    checkpoints.check();  // a failed background write stops every rank here
    guard.stop_if_diverged(last_checkpoint);  // before any checkpoint of this step
    if ((run.ckpt_every > 0 && state.step % run.ckpt_every == 0) || last || guard.preempted()) save(state.step);
    if (guard.preempted() && !last) {
      checkpoints.finish();  // the checkpoint is on disk before the exit code says so
      return report.preempted(guard.preempted_by(), state.step), runtime::kPreemptedExitCode;
    }
  }
  checkpoints.finish();
  report.finish();
  if (!run.trace.empty()) {
    mesh.context().trace.write_chrome_trace(mesh.comm(), run.trace);
    report.wrote_trace(run.trace);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::MpiRuntime mpi(argc, argv);
  return parallel::run_mpi_main(MPI_COMM_WORLD, [&] { return train(argc, argv); });
}
