#include "framework/peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>

namespace shardlab {
namespace {

#if defined(__AVX512F__)
constexpr int kFmaLanes = 16;
#elif defined(__AVX__)
constexpr int kFmaLanes = 8;
#else
constexpr int kFmaLanes = 4;
#endif
using Vec = float __attribute__((vector_size(kFmaLanes * sizeof(float))));
constexpr int kChains = 12;  // enough independent FMAs to cover the FMA latency on two ports

// Returns a value depending on every chain so the compiler cannot drop the work.
float fma_chains(long iterations) {
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Vec{} + 0.001f * c;
  const Vec a = Vec{} + 0.999999f, b = Vec{} + 1e-7f;
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  }
  float s = 0.0f;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < kFmaLanes; ++l) s += acc[c][l];
  return s;
}

// 16 fp32 lanes of vdpbf16ps a chain: each adds two bf16 products per lane.
constexpr int kBf16Lanes = 16;
constexpr int kBf16FlopsPerLane = 4;

// Compiled for avx512_bf16 whatever the build targets; called only where the CPU has it.
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_chains(long iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  alignas(64) float lanes[kBf16Lanes];
  float s = 0.0f;
  for (int c = 0; c < kChains; ++c) {
    _mm512_store_ps(lanes, acc[c]);
    for (float v : lanes) s += v;
  }
  return s;
}

bool cpu_runs_dpbf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

// The best rate of `chains(iterations)` on `threads` threads at once, growing the loop
// until one run takes a measurable time; `flops_per_iteration` per thread.
template <typename Chains>
double measure_rate(Chains chains, double flops_per_iteration, int threads, double seconds) {
  long iterations = 1 << 16;
  double best = 0.0;
  volatile float sink = 0.0f;
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    auto t0 = std::chrono::steady_clock::now();
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += chains(iterations);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    const double flops = flops_per_iteration * static_cast<double>(iterations) * threads;
    if (dt > 0.01) best = std::max(best, flops / dt);
    else iterations *= 2;
  }
  return best;
}

}  // namespace

double measure_peak_flops(int threads, double seconds) {
  return measure_rate(fma_chains, 2.0 * kFmaLanes * kChains, threads, seconds);
}

double measure_peak_bf16_flops(int threads, double seconds) {
  if (!cpu_runs_dpbf16()) return 0.0;
  return measure_rate(dpbf16_chains, static_cast<double>(kBf16FlopsPerLane) * kBf16Lanes * kChains, threads, seconds);
}

double mfu_denominator(bool bf16, double fp32_peak, double bf16_peak) {
  return bf16 && bf16_peak > 0 ? bf16_peak : fp32_peak;
}

}  // namespace shardlab
