#include "parallel/cost/hardware/calibrate.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "framework/error.h"
#include "framework/ops/matmul.h"
#include "framework/precision.h"

namespace shardlab::cost {
namespace {

using Clock = std::chrono::steady_clock;

// Best (shortest) time of `run` over repeats filling `budget` seconds, after one warm-up.
template <typename Run>
double best_seconds(double budget, Run run) {
  run();
  double best = 1e30;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  } while (std::chrono::duration<double>(Clock::now() - start).count() < budget);
  return best;
}

}  // namespace

// FLOP/s of an n x n x n GEMM whose operands are `one` and `half` of type T (float or Bf16).
template <typename T>
double gemm_flops(int64_t n, double seconds, T one, T half) {
  if (n < 1) throw UserError("GEMM size must be >= 1, got " + std::to_string(n));
  std::vector<T> a(n * n, one), b(n * n, half);
  std::vector<float> c(n * n);
  const MatView view = MatView::matrix(n, n, n);
  const double t = best_seconds(seconds, [&] { matmul_raw(a.data(), view, b.data(), view, c.data(), view); });
  return 2.0 * n * n * n / t;
}

double measure_gemm_flops(int64_t n, double seconds) { return gemm_flops(n, seconds, 1.0f, 0.5f); }

double measure_bf16_gemm_flops(int64_t n, double seconds) {
  return gemm_flops(n, seconds, to_bf16(1.0f), to_bf16(0.5f));
}

double measure_memory_bandwidth(double seconds) {
  const size_t n = size_t{16} << 20;  // 3 x 64 MiB, far past any cache
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const float s = 3.0f;
  const double t = best_seconds(seconds, [&] {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
  });
  return 3.0 * sizeof(float) * n / t;
}

double measure_copy_bandwidth(double seconds) {
  const size_t bytes = size_t{64} << 20;
  std::vector<char> from(bytes, 1), to(bytes);
  const double t = best_seconds(seconds, [&] { std::memcpy(to.data(), from.data(), bytes); });
  return bytes / t;
}

HardwareProfile calibrate_local(const CalibrationOptions& o) {
  HardwareProfile p;
  p.name = "local";
  char host[256] = "this host";
  gethostname(host, sizeof host - 1);
  p.flops_fp32 = measure_gemm_flops(o.gemm_size, o.seconds_per_measure);
  // A bf16 matmul runs at the faster of oneDNN's bf16 kernels, where the CPU has the
  // instructions (without them oneDNN emulates bf16, several times slower), and the fp32
  // kernels on rounded operands -- what --bf16-matmul auto picks (framework/precision.h).
  const double bf16_kernels = cpu_has_bf16_instructions() ? measure_bf16_gemm_flops(o.gemm_size, o.seconds_per_measure) : 0;
  p.flops_bf16 = std::max(p.flops_fp32, bf16_kernels);
  char what[512];
  std::snprintf(what, sizeof what, "calibrated on %s (GEMM n=%lld: fp32 kernels %.0f GFLOP/s, bf16 kernels %s)", host,
                static_cast<long long>(o.gemm_size), p.flops_fp32 / 1e9,
                bf16_kernels > 0 ? (std::to_string(static_cast<int>(bf16_kernels / 1e9)) + " GFLOP/s").c_str()
                                 : "none (no avx512_bf16/amx_bf16)");
  p.description = what;
  p.flops_int8 = p.flops_fp32;
  p.hbm_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  p.hbm_bandwidth = measure_memory_bandwidth(o.seconds_per_measure);
  p.interconnect = Interconnect::kTorus;
  p.ici = {measure_copy_bandwidth(o.seconds_per_measure), o.link_latency};
  p.dcn = p.ici;
  p.wraparound = true;
  p.node_size = 1 << 20;
  p.axis_links = o.axis_links;
  p.fingerprint = local_fingerprint(omp_get_max_threads());
  return p;
}

std::string keep_from_file(const std::string& path, HardwareProfile& fresh) {
  if (!std::ifstream(path)) return "";
  HardwareProfile old;
  try {
    old = load_profile(path);
  } catch (const UserError&) {  // a corrupt file: nothing in it to trust
    return "";
  }
  std::string kept;
  for (const auto& [axis, link] : old.axis_links)
    if (fresh.axis_links.try_emplace(axis, link).second) kept += (kept.empty() ? "link." : ", link.") + axis;
  const int threads = fingerprint_threads(fresh.fingerprint), old_threads = fingerprint_threads(old.fingerprint);
  if (threads == 0 || old_threads == 0 || fingerprint_machine(old.fingerprint) != fingerprint_machine(fresh.fingerprint))
    return kept;
  old.other_threads[old_threads] = {old.flops_fp32, old.flops_bf16, old.flops_int8, old.hbm_bandwidth};
  std::string counts;
  for (const auto& [count, rates] : old.other_threads) {
    if (count == threads || !fresh.other_threads.try_emplace(count, rates).second) continue;
    counts += (counts.empty() ? "" : ", ") + std::to_string(count);
  }
  if (!counts.empty()) kept += (kept.empty() ? "" : ", ") + ("the figures for " + counts + (counts == "1" ? " thread" : " threads"));
  return kept;
}

}  // namespace shardlab::cost
