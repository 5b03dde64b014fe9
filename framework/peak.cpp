#include "framework/peak.h"

#include <omp.h>

#include <chrono>

namespace shardlab {
namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));
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
    for (int l = 0; l < kLanes; ++l) s += acc[c][l];
  return s;
}

}  // namespace

double measure_peak_flops(int threads, double seconds) {
  long iterations = 1 << 16;
  double best = 0.0;
  volatile float sink = 0.0f;
  auto start = std::chrono::steady_clock::now();
  // Grow the loop until one run takes a measurable time, then keep the best rate seen.
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    auto t0 = std::chrono::steady_clock::now();
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += fma_chains(iterations);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    const double flops = 2.0 * kLanes * kChains * static_cast<double>(iterations) * threads;
    if (dt > 0.01) best = std::max(best, flops / dt);
    else iterations *= 2;
  }
  return best;
}

}  // namespace shardlab
