// bench_decode_products: the weight products of one decode step alone, from the decode
// panels (framework/ops/matvec.h), against the memory and FLOP rates they are bound by.
//
//   build/bench/bench_decode_products                       # bench/decode_bench.sh's model
//   build/bench/bench_decode_products --rows 1,8,16 --bf16
//
// A GPT's decode step multiplies every weight matrix once by B rows (one token per
// sequence): per layer W_qkv [3D, D], W_o [D, D], W_fc [F, D], W_proj [D, F], then the head
// [V, D]. This program lays those matrices out as decode panels (random weights: the time
// does not depend on the values), then per row count times --reps passes over all of them,
// interleaving the row counts pass by pass (so the machine's drift hits each alike), and
// prints per row count the median pass beside
//   - the panels' bytes over the triad bandwidth measured in this run (the memory-bound time
//     the book's decode roofline predicts), and
//   - the pass's FLOPs (2 per weight per row) over the FMA peak measured in this run, and
//   - the same rows multiplied by the first layer's W_o panels 20 times over (D x D: 2.4 MB
//     in fp32 at D 768, mostly from the caches): the kernel's rate when memory is less of
//     a limit.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/ops/matvec.h"
#include "framework/peak.h"
#include "framework/rng.h"
#include "parallel/cost/hardware/calibrate.h"

using namespace shardlab;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kHotRepeats = 20;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<int64_t> parse_rows(const std::string& list) {
  std::vector<int64_t> rows;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < 1) {
      throw UserError("--rows: '" + item + "' is not a row count; give positive integers, e.g. --rows 1,8,16");
    }
    rows.push_back(value);
  }
  if (rows.empty()) throw UserError("--rows: no row counts given; e.g. --rows 1,8,16");
  return rows;
}

int64_t positive(const cxxopts::ParseResult& args, const char* flag) {
  const int64_t value = args[flag].as<int64_t>();
  if (value < 1) throw UserError(std::string("--") + flag + " must be at least 1, got " + std::to_string(value));
  return value;
}

int run(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  } catch (const cxxopts::exceptions::exception& e) {
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
  }
  return 1;
}

namespace {

int run(int argc, char** argv) {
  cxxopts::Options options("bench_decode_products", "Time a decode step's weight products from the decode panels.");
  options.add_options()
      ("d-model", "D", cxxopts::value<int64_t>()->default_value("768"))
      ("d-ff", "F", cxxopts::value<int64_t>()->default_value("3072"))
      ("layers", "L", cxxopts::value<int64_t>()->default_value("6"))
      ("vocab", "V", cxxopts::value<int64_t>()->default_value("256"))
      ("rows", "row counts (the batch of a decode step)", cxxopts::value<std::string>()->default_value("1,2,4,8,16"))
      ("reps", "timed passes per row count", cxxopts::value<int64_t>()->default_value("20"))
      ("bf16", "bf16 panels (half the bytes)", cxxopts::value<bool>()->default_value("false"))
      ("threads", "OpenMP threads", cxxopts::value<int64_t>()->default_value("2"))
      ("h,help", "help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const int64_t D = positive(args, "d-model"), F = positive(args, "d-ff");
  const int64_t L = positive(args, "layers"), V = positive(args, "vocab");
  const std::vector<int64_t> row_counts = parse_rows(args["rows"].as<std::string>());
  const int64_t reps = positive(args, "reps");
  const bool bf16 = args["bf16"].as<bool>();
  omp_set_num_threads(static_cast<int>(positive(args, "threads")));

  // The step's matrices [N, K], layer by layer, then the head.
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t l = 0; l < L; ++l) shapes.insert(shapes.end(), {{3 * D, D}, {D, D}, {F, D}, {D, F}});
  shapes.push_back({V, D});
  std::vector<MatvecPanels> panels;
  int64_t bytes = 0, weights = 0, widest = 0;
  for (const auto& [N, K] : shapes) {
    std::vector<float> w(static_cast<size_t>(N * K));
    Rng rng(1);
    for (size_t i = 0; i < w.size(); ++i) w[i] = rng.normal(static_cast<uint64_t>(panels.size()), i) * 0.02f;
    panels.emplace_back(w.data(), N, K, bf16);
    bytes += panels.back().bytes();
    weights += N * K;
    widest = std::max({widest, N, K});
  }
  const int64_t max_rows = *std::max_element(row_counts.begin(), row_counts.end());
  std::vector<float> x(static_cast<size_t>(max_rows * widest), 0.5f), y(static_cast<size_t>(max_rows * widest));
  const auto pass = [&](int64_t M, size_t first, size_t count) {
    for (size_t i = first; i < first + count; ++i) panels[i].multiply(x.data(), nullptr, y.data(), M);
  };

  const double bandwidth = cost::measure_memory_bandwidth(0.5), peak = measure_peak_flops(omp_get_max_threads(), 0.3);
  std::printf("%zu matrices, %.1f MB of %s panels; measured here: STREAM triad %.1f GB/s, FMA peak %.0f GFLOP/s "
              "(%d threads)\n",
              panels.size(), bytes / 1e6, bf16 ? "bf16" : "fp32", bandwidth / 1e9, peak / 1e9, omp_get_max_threads());
  for (const int64_t M : row_counts) pass(M, 0, panels.size());  // warm-up
  std::vector<std::vector<double>> all(row_counts.size()), hot(row_counts.size());
  for (int64_t r = 0; r < reps; ++r) {
    for (size_t i = 0; i < row_counts.size(); ++i) {
      auto t0 = Clock::now();
      pass(row_counts[i], 0, panels.size());
      all[i].push_back(seconds_since(t0));
      // W_o (the second matrix) again and again.
      pass(row_counts[i], 1, 1);
      t0 = Clock::now();
      for (int k = 0; k < kHotRepeats; ++k) pass(row_counts[i], 1, 1);
      hot[i].push_back(seconds_since(t0));
    }
  }
  const double memory_bound = bytes / bandwidth;
  std::printf("%6s %10s %10s %10s %9s %12s %12s %12s\n", "rows", "pass ms", "bytes/BW", "FLOPs/peak", "pass/mem",
              "GB/s", "GFLOP/s", "W_o GFLOP/s");
  for (size_t i = 0; i < row_counts.size(); ++i) {
    const int64_t M = row_counts[i];
    const double t = median(all[i]), flops = 2.0 * weights * M, hot_flops = 2.0 * D * D * M * kHotRepeats;
    std::printf("%6lld %10.3f %10.3f %10.3f %9.2f %12.1f %12.1f %12.1f\n", static_cast<long long>(M), 1e3 * t,
                1e3 * memory_bound, 1e3 * flops / peak, t / memory_bound, bytes / t / 1e9, flops / t / 1e9,
                hot_flops / median(hot[i]) / 1e9);
  }
  return 0;
}

}  // namespace
