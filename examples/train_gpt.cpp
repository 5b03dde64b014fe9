// train_gpt: the main job. Trains a GPT-2 or LLaMA-style model on the embedded arithmetic
// task (or a text file / llm.c shard) and reports measured speed against the measured peak.
//
//   train_gpt                                  # defaults: gpt-small on arithmetic, 300 steps
//   train_gpt --model llama-small --steps 500 --ckpt-every 100
//   train_gpt --resume runs/ckpt_000100.h5     # continues bit for bit
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "examples/support/data_source.h"
#include "examples/support/evaluate.h"
#include "examples/support/main_guard.h"
#include "examples/support/metrics.h"
#include "examples/support/training_state.h"
#include "framework/memory.h"
#include "framework/ops.h"
#include "framework/peak.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

using namespace shardlab;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const cli::RunConfig& run, nn::Module& model) {
  if (run.optimizer == "sgd") {
    return std::make_unique<optim::SGD>(model.named_parameters(), optim::SGDOptions{.momentum = static_cast<float>(run.momentum)});
  }
  return std::make_unique<optim::AdamW>(model.named_parameters(),
                                        optim::AdamWOptions{.weight_decay = static_cast<float>(run.weight_decay)});
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int train(int argc, char** argv) {
  const cli::RunConfig run = cli::parse_run_config(argc, argv);
  if (run.help) return std::printf("%s\n", run.help_text.c_str()), 0;
  if (run.threads > 0) omp_set_num_threads(run.threads);

  const cli::DataSource data = cli::open_data(run);
  nn::Transformer model(run.model);
  nn::initialize(model, run.seed);
  auto opt = make_optimizer(run, model);
  const optim::WarmupCosine schedule(run.lr, run.min_lr, run.warmup_steps(), run.steps);
  data::BatchLoader loader(data.train, run.batch, run.sequence_length());
  cli::TrainState state;
  if (!run.resume.empty()) {
    state = cli::load_checkpoint(run.resume, model, opt.get(), run.model);
    loader.set_position(state.data_position);
  }
  cli::MetricsLog metrics(run.metrics, /*append=*/!run.resume.empty());

  const int threads = omp_get_max_threads();
  const double peak = measure_peak_flops(threads);
  const double flops_per_token = cli::train_flops_per_token(run.model, run.sequence_length());
  const double tokens_per_step = static_cast<double>(run.batch * run.sequence_length());
  std::printf("model %s | %.2fM params | data %s\n", run.model.describe().c_str(), model.num_parameters() / 1e6,
              data.train->describe().c_str());
  std::printf("batch %lld x %lld tokens | %d threads | measured FMA peak %.1f GFLOP/s | %.1f MFLOP/token\n",
              static_cast<long long>(run.batch), static_cast<long long>(run.sequence_length()), threads, peak / 1e9,
              flops_per_token / 1e6);

  const auto start = Clock::now();
  const int64_t first_step = state.step;
  for (int64_t step = state.step; step < run.steps; ++step) {
    const auto t0 = Clock::now();
    const data::Batch batch = loader.next();
    const double loss = optim::accumulate_gradients(run.grad_accum, [&](int i, float loss_scale) {
      const data::Batch micro = batch.microbatch(i, run.grad_accum);
      Tensor l = model.loss(micro.inputs, micro.targets, micro.rows, micro.seq_len);
      ops::scale(l, loss_scale).backward();
      return static_cast<double>(l.item());
    });
    const double grad_norm = optim::clip_grad_norm(opt->params(), run.grad_clip);
    const float lr = schedule.lr(step);
    opt->step(lr);
    opt->zero_grad();
    const double dt = seconds_since(t0), tokens_per_s = tokens_per_step / dt;
    const double mfu = tokens_per_s * flops_per_token / peak;
    state = {step + 1, loader.position()};

    std::map<std::string, double> row{{"step", double(state.step)}, {"loss", loss},  {"lr", lr},
                                      {"grad_norm", grad_norm},     {"step_s", dt},   {"tokens_per_s", tokens_per_s},
                                      {"mfu", mfu}};
    if (state.step % run.log_every == 0 || state.step == run.steps) {
      const double eta = seconds_since(start) / double(state.step - first_step) * double(run.steps - state.step);
      std::printf("step %5lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %6.0f tokens/s | MFU %4.1f%% of measured peak | ETA %s\n",
                  static_cast<long long>(state.step), static_cast<long long>(run.steps), loss, lr, grad_norm,
                  tokens_per_s, 100.0 * mfu, cli::format_duration(eta).c_str());
      std::fflush(stdout);
    }
    const bool last = state.step == run.steps;
    if ((run.eval_every > 0 && state.step % run.eval_every == 0) || last) {
      const cli::EvalResult e = cli::evaluate(model, data, run);
      row["eval_loss"] = e.loss;
      std::printf("eval  step %lld | held-out loss %.4f", static_cast<long long>(state.step), e.loss);
      if (e.accuracy >= 0) row["eval_accuracy"] = e.accuracy, std::printf(" | answer exact-match %.1f%%", 100 * e.accuracy);
      std::printf("\n");
    }
    if ((run.ckpt_every > 0 && state.step % run.ckpt_every == 0) || last) {
      const std::string path = cli::checkpoint_path(run.ckpt_dir, state.step);
      cli::save_checkpoint(path, model, opt.get(), state, run);
      std::printf("saved %s\n", path.c_str());
    }
    metrics.write(row);
  }
  std::printf("peak tensor memory %s (parameters %s, gradients %s, optimizer %s, activations %s)\n",
              format_bytes(MemoryTracker::peak_total()).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Parameters)).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Gradients)).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Optimizer)).c_str(),
              format_bytes(MemoryTracker::peak(MemoryCategory::Activations)).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::guarded_main([&] { return train(argc, argv); }); }
