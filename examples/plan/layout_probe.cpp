#include "examples/plan/layout_probe.h"

#include "examples/plan/train.h"

#include <omp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "framework/error.h"
#include "framework/precision.h"
#include "parallel/cost/training/cpu_step.h"
#include "parallel/runtime/compute_prediction.h"

namespace shardlab::plan {

LayoutProbe::LayoutProbe(const cost::TrainConfig& config, int threads, bool bf16)
    : threads_(threads), bf16_(bf16) {
  const std::optional<nn::ModelConfig> model = cost::model_config_of(config.model);
  if (!model)
    throw UserError("--probe times the layouts with shardlab's own model, which cannot build " +
                    config.model.describe() + " (a GPT or LLaMA shape with head dim D / N); drop --probe");
  model_ = *model;
  model_.remat = config.remat;
  seq_len_ = config.model.context;
  batch_ = static_cast<int64_t>(std::llround(config.batch_tokens / static_cast<double>(seq_len_)));
}

runtime::RunConfig LayoutProbe::run_for(const cost::Layout& l) const {
  runtime::RunConfig run;
  run.model = model_;
  run.batch = batch_;
  run.seq_len = seq_len_;
  run.grad_accum = l.microbatches;
  run.zero = l.zero;
  run.sequence_parallel = l.sequence_parallel;
  run.pp_virtual = l.virtual_stages;
  run.threads = threads_;
  return run;
}

LayoutProbe::Shape LayoutProbe::shape_of(const cost::Layout& l) const {
  const int64_t rows = std::max<int64_t>(1, batch_ / l.data_ranks() / std::max(1, l.microbatches));
  return {l.tensor, l.pipe, l.context, rows, l.num_ranks()};
}

namespace {

constexpr const char* kRankCommand = "probe-rank";  // the hidden subcommand each rank runs

// What one probing rank is told, as `key=value` arguments of `shardlab-plan probe-rank`.
std::vector<std::string> rank_arguments(const runtime::RunConfig& run, const cost::Layout& l, int threads, bool bf16) {
  const nn::ModelConfig& m = run.model;
  std::vector<std::string> args = {kRankCommand};
  const auto add = [&args](const char* key, int64_t value) { args.push_back(std::string(key) + "=" + std::to_string(value)); };
  args.push_back("arch=" + nn::arch_name(m.arch));
  args.push_back("remat=" + nn::remat_name(m.remat));
  add("vocab", m.vocab), add("context", m.context), add("d_model", m.d_model), add("layers", m.n_layers);
  add("heads", m.n_heads), add("kv_heads", m.n_kv_heads), add("d_ff", m.d_ff);
  add("experts", m.experts), add("top_k", m.top_k), add("moe_every", m.moe_every);
  add("batch", run.batch), add("seq_len", run.seq_len), add("microbatches", l.microbatches);
  add("data", l.data), add("fsdp", l.fsdp), add("context_ranks", l.context), add("pipe", l.pipe);
  add("expert", l.expert), add("tensor", l.tensor), add("threads", threads), add("bf16", bf16);
  return args;
}

// One process per rank of `layout` (this executable, freshly started: a forked copy of a
// process whose OpenMP threads exist would hang in its first parallel region), all timing
// their stand-ins at once as a run's ranks probe, sharing this machine's cores as they
// would; each prints its timing.
std::vector<runtime::RankTiming> time_ranks_at_once(const runtime::RunConfig& run, const cost::Layout& layout,
                                                    int threads, bool bf16) {
  std::vector<std::string> args = rank_arguments(run, layout, threads, bf16);
  std::string exe = "/proc/self/exe";
  std::vector<char*> argv = {exe.data()};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  struct Child {
    pid_t pid;
    int fd;
  };
  std::vector<Child> children;
  // On a failure to start a rank, the ranks already started are stopped and reaped first.
  const auto give_up = [&children](const std::string& why) {
    for (const Child& child : children) {
      kill(child.pid, SIGKILL);
      close(child.fd);
      waitpid(child.pid, nullptr, 0);
    }
    throw std::runtime_error("--probe: " + why);
  };
  for (int rank = 0; rank < layout.num_ranks(); ++rank) {
    int fds[2];
    if (pipe(fds) != 0) give_up(std::string("pipe failed: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (error != 0) {
      close(fds[0]);
      give_up(std::string("starting a probing rank failed: ") + std::strerror(error));
    }
    children.push_back({pid, fds[0]});
  }
  std::vector<runtime::RankTiming> timings;
  std::string failed;
  for (const Child& child : children) {
    std::string text;
    char buffer[256];
    for (ssize_t n; (n = read(child.fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
    close(child.fd);
    int status = 0;
    waitpid(child.pid, &status, 0);
    runtime::RankTiming t;
    long long blocks = 0;
    const bool parsed = std::sscanf(text.c_str(), "%lld %lf %lf %lf", &blocks, &t.period_seconds, &t.head_seconds,
                                    &t.total_seconds) == 4;
    t.period_blocks = blocks;
    if (parsed && WIFEXITED(status) && WEXITSTATUS(status) == 0) timings.push_back(t);
    else failed = "a probing rank of " + cost::layout_summary(layout) + " failed (exit status " + std::to_string(status) + ")";
  }
  if (!failed.empty()) throw std::runtime_error("--probe: " + failed);
  return timings;
}

}  // namespace

int probe_rank_main(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (eq != std::string::npos) kv[a.substr(0, eq)] = a.substr(eq + 1);
  }
  const auto num = [&kv](const char* key) { return static_cast<int64_t>(std::stoll(kv.at(key))); };
  runtime::RunConfig run;
  nn::ModelConfig& m = run.model;
  m.arch = nn::parse_arch(kv.at("arch"));
  m.remat = nn::parse_remat(kv.at("remat"));
  m.vocab = num("vocab"), m.context = num("context"), m.d_model = num("d_model"), m.n_layers = num("layers");
  m.n_heads = num("heads"), m.n_kv_heads = num("kv_heads"), m.d_ff = num("d_ff");
  m.experts = num("experts"), m.top_k = num("top_k"), m.moe_every = num("moe_every");
  run.batch = num("batch"), run.seq_len = num("seq_len"), run.grad_accum = static_cast<int>(num("microbatches"));
  cost::Layout l;
  l.data = static_cast<int>(num("data")), l.fsdp = static_cast<int>(num("fsdp"));
  l.context = static_cast<int>(num("context_ranks")), l.pipe = static_cast<int>(num("pipe"));
  l.expert = static_cast<int>(num("expert")), l.tensor = static_cast<int>(num("tensor"));
  l.microbatches = run.grad_accum;
  omp_set_num_threads(static_cast<int>(num("threads")));
  const PrecisionScope scope(ComputePrecision{.compute = num("bf16") ? DType::kBF16 : DType::kF32,
                                              .matmul = expected_bf16_matmul("auto")});
  const runtime::RankTiming t = runtime::time_rank_compute(run, l);
  std::printf("%lld %.9g %.9g %.9g\n", static_cast<long long>(t.period_blocks), t.period_seconds, t.head_seconds,
              t.total_seconds);
  return 0;
}

void LayoutProbe::time_shapes(const std::vector<cost::Layout>& layouts) {
  std::map<Shape, cost::Layout> pending;  // a layout of each shape not timed yet
  for (const cost::Layout& l : layouts)
    if (!probes_.count(shape_of(l))) pending.emplace(shape_of(l), l);
  if (pending.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  std::map<Shape, std::vector<runtime::ComputeProbe>> rounds;
  for (int round = 0; round < kRounds; ++round) {
    for (const auto& [shape, l] : pending) {
      const std::vector<runtime::RankTiming> ranks = time_ranks_at_once(run_for(l), l, threads_, bf16_);
      rounds[shape].push_back(runtime::combine_rank_timings(ranks, cost::core_sharing(l.num_ranks(), threads_)));
    }
  }
  for (auto& [shape, probes] : rounds) {  // the round whose whole microbatch (blocks and head) was the median
    const auto microbatch = [&](const runtime::ComputeProbe& p) {
      const double periods = static_cast<double>(model_.n_layers) / std::get<1>(shape) / p.period_blocks;
      return periods * p.period_seconds + p.head_seconds;
    };
    std::sort(probes.begin(), probes.end(), [&](const auto& a, const auto& b) { return microbatch(a) < microbatch(b); });
    probes_.emplace(shape, probes[probes.size() / 2]);
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double LayoutProbe::compute_seconds(const cost::Layout& l) {
  time_shapes({l});
  const runtime::RunConfig run = run_for(l);
  const runtime::ComputeProbe& probe = probes_.at(shape_of(l));
  // Ranks that synchronise wait for the slowest: the run's prediction adds the probe's
  // rank skew of the compute (examples/train/run_report.cpp), and so does this.
  const double skew = l.num_ranks() > 1 ? 1.0 + probe.rank_skew : 1.0;
  if (l.pipe == 1) return skew * runtime::predict_compute_seconds(run, l, &probe);
  const parallel::PipelineSchedule schedule =
      parallel::make_pipeline_schedule(l.schedule, l.pipe, l.virtual_stages, l.microbatches);
  return skew * runtime::predict_compute_seconds(run, l, &probe, &schedule);
}

std::string LayoutProbe::summary() const {
  char text[96];
  std::snprintf(text, sizeof text, "%zu rank shape%s timed in %d interleaved rounds, %.1f s", probes_.size(),
                probes_.size() == 1 ? "" : "s", kRounds, seconds_);
  return text;
}

}  // namespace shardlab::plan
