// bench_train_step: one training step (forward, backward, AdamW) of the PyTorch reference
// configuration (bench/torch_gpt_bench.py), timed phase by phase.
//
//   OMP_NUM_THREADS=2 build/bench/bench_train_step --threads 2
//   bench/compare_torch.sh        # this and the PyTorch script side by side, 1 and 2 threads
//
// Same model (GPT-2 style, tied embeddings, biases, GELU), same FLOP convention
// (6 * N_matmul + 12 * L * T * D per token, no causal discount) and same MFU denominator
// (149.5 GFLOP/s per thread unless --peak-gflops), so the two print comparable lines.
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <optional>
#include <vector>

#include "parallel/runtime/metrics.h"
#include "framework/nn/transformer.h"
#include "framework/peak.h"
#include "framework/ops/gemm.h"
#include "framework/precision.h"
#include "optim/adamw.h"

using namespace shardlab;
using Clock = std::chrono::steady_clock;

// CPU seconds used by all threads of this process: on a machine shared with other jobs it
// still measures this program's work when wall time does not (at 1 thread).
double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int main(int argc, char** argv) {
  cxxopts::Options o("bench_train_step", "Time forward / backward / AdamW of the reference GPT config.");
  o.add_options()("threads", "OpenMP threads", cxxopts::value<int>()->default_value("2"))(
      "steps", "timed steps", cxxopts::value<int>()->default_value("10"))(
      "warmup", "untimed steps", cxxopts::value<int>()->default_value("3"))(
      "batch", "B", cxxopts::value<int64_t>()->default_value("8"))("ctx", "T", cxxopts::value<int64_t>()->default_value("256"))(
      "d", "D", cxxopts::value<int64_t>()->default_value("256"))("layers", "L", cxxopts::value<int64_t>()->default_value("4"))(
      "heads", "N", cxxopts::value<int64_t>()->default_value("4"))("vocab", "V", cxxopts::value<int64_t>()->default_value("256"))(
      "precision", "fp32 or bf16 (bf16 matmul operands, fp32 accumulation, master weights and AdamW)",
      cxxopts::value<std::string>()->default_value("fp32"))(
      "bf16-matmul", "bf16 matmul kernels: auto (measured), native or rounded", cxxopts::value<std::string>()->default_value("auto"))(
      "matmul-split", "on: large matmuls split over the threads by shardlab; off: oneDNN partitions them (framework/ops/gemm.h)",
      cxxopts::value<std::string>()->default_value("on"))(
      "peak-gflops", "FP32 peak for MFU (default 149.5 per thread, as the PyTorch script)",
      cxxopts::value<double>()->default_value("0"))("h,help", "help");
  auto a = o.parse(argc, argv);
  if (a.count("help")) return std::printf("%s\n", o.help().c_str()), 0;
  const int threads = a["threads"].as<int>();
  omp_set_num_threads(threads);
  const std::string split = a["matmul-split"].as<std::string>();
  if (split != "on" && split != "off") return std::fprintf(stderr, "--matmul-split %s: use on or off\n", split.c_str()), 2;
  set_matmul_thread_split(split == "on");
  PrecisionPolicy policy;
  policy.compute = policy.gather = policy.activation = parse_dtype(a["precision"].as<std::string>(), "--precision");
  if (policy.compute == DType::kBF16) {
    const Bf16MatmulChoice choice = select_bf16_matmul(a["bf16-matmul"].as<std::string>());
    policy.matmul = choice.path;
    policy.matmul_reason = choice.reason;
  }

  nn::ModelConfig c = nn::ModelConfig::preset("gpt-bench");
  c.vocab = a["vocab"].as<int64_t>();
  c.context = a["ctx"].as<int64_t>();
  c.d_model = a["d"].as<int64_t>();
  c.n_layers = a["layers"].as<int64_t>();
  c.n_heads = c.n_kv_heads = a["heads"].as<int64_t>();
  c.d_ff = 4 * c.d_model;
  const int64_t B = a["batch"].as<int64_t>(), T = c.context;
  nn::Transformer model(c);
  nn::initialize(model, 0);
  optim::AdamW opt(optim::module_parameters(model), {.weight_decay = 0.1f});

  std::vector<int32_t> data(B * (T + 1));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>((i * 2654435761u >> 7) % c.vocab);
  std::vector<int32_t> x, y;
  for (int64_t b = 0; b < B; ++b) {
    x.insert(x.end(), data.begin() + b * (T + 1), data.begin() + b * (T + 1) + T);
    y.insert(y.end(), data.begin() + b * (T + 1) + 1, data.begin() + (b + 1) * (T + 1));
  }

  const double flops_token = runtime::train_flops_per_token(c, T), tokens = static_cast<double>(B * T);
  const double peak = (a["peak-gflops"].as<double>() > 0 ? a["peak-gflops"].as<double>() : 149.5 * threads) * 1e9;
  std::vector<double> fwd, bwd, adam, total, cpu;
  float loss_value = 0;
  for (int s = 0; s < a["warmup"].as<int>() + a["steps"].as<int>(); ++s) {
    const double c0 = process_cpu_seconds();
    auto t0 = Clock::now();
    std::optional<PrecisionScope> precision(std::in_place, policy.compute_precision());  // forward and backward
    Tensor loss = model.loss(x, y, B, T);
    auto t1 = Clock::now();
    model.zero_grad();
    loss.backward();
    precision.reset();
    auto t2 = Clock::now();
    opt.step(3e-4f);
    auto t3 = Clock::now();
    const double c3 = process_cpu_seconds();
    loss_value = loss.item();
    if (s < a["warmup"].as<int>()) continue;
    auto sec = [](auto p, auto q) { return std::chrono::duration<double>(q - p).count(); };
    fwd.push_back(sec(t0, t1));
    bwd.push_back(sec(t1, t2));
    adam.push_back(sec(t2, t3));
    total.push_back(sec(t0, t3));
    cpu.push_back(c3 - c0);
  }
  auto best = [](std::vector<double> v) { return *std::min_element(v.begin(), v.end()); };
  auto median = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  const double fp32_peak = measure_peak_flops(threads), bf16_peak = measure_peak_bf16_flops(threads);
  std::printf("shardlab  threads=%d  measured FMA peak %.1f GFLOP/s (MFU below uses %.1f, as the PyTorch script)\n",
              threads, fp32_peak / 1e9, peak / 1e9);
  std::printf("config: vocab=%lld ctx=%lld d=%lld layers=%lld heads=%lld batch=%lld %s  params=%lld  FLOPs/step=%.2f G\n",
              (long long)c.vocab, (long long)T, (long long)c.d_model, (long long)c.n_layers, (long long)c.n_heads,
              (long long)B, dtype_name(policy.compute), (long long)model.num_parameters(), flops_token * tokens / 1e9);
  for (auto [name, t] : {std::pair{"best", best(total)}, std::pair{"median", median(total)}}) {
    std::printf("%-6s step %8.1f ms  %9.0f tokens/s  %7.2f GFLOP/s  MFU %5.1f%% of %.1f GFLOP/s\n", name, t * 1e3,
                tokens / t, tokens * flops_token / t / 1e9, 100 * tokens * flops_token / t / peak, peak / 1e9);
  }
  const double achieved = tokens * flops_token / median(total);
  std::printf("measured peaks fp32 %.1f GFLOP/s (FMA loop), bf16 %.1f GFLOP/s (vdpbf16ps loop; 0: no avx512_bf16) | "
              "median MFU %.1f%% of fp32 peak, %.1f%% of bf16 peak\n",
              fp32_peak / 1e9, bf16_peak / 1e9, 100 * achieved / fp32_peak, bf16_peak > 0 ? 100 * achieved / bf16_peak : 0.0);
  std::printf("breakdown (min): forward %.1f ms  backward %.1f ms  AdamW %.1f ms\n", best(fwd) * 1e3, best(bwd) * 1e3,
              best(adam) * 1e3);
  std::printf("cpu    step %8.1f ms of CPU time over %d thread(s) (min; at 1 thread: the step's work without time-sharing)\n",
              best(cpu) * 1e3, threads);
  std::printf("dtype  %s\n", policy.describe().c_str());
  std::printf("split  %s: %lld matmuls split over the threads\n", split.c_str(),
              static_cast<long long>(thread_split_matmuls()));
  std::printf("final loss %.4f\n", loss_value);
  return 0;
}
