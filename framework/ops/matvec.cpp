#include "framework/ops/matvec.h"

#include <algorithm>
#include <cstring>

namespace shardlab {
namespace {

// 16 fp32 lanes: one AVX-512 register, or two AVX registers where the target has no AVX-512.
typedef float Lanes __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;
constexpr int64_t kWeightRows = 4;  // weight rows multiplied per pass over x
constexpr int64_t kRowsPerTile = 4;  // x rows held per pass (4 x 4 accumulators)

Lanes load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float sum_lanes(const Lanes& v) {
  float s = 0.0f;
  for (int64_t i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// y[m, j] for MB rows of x (row stride K) and `nr` (<= kWeightRows) rows of w, y's row stride N.
// Every (m, j) sums the same lanes in the same order whatever MB and nr are.
template <int MB>
void tile(const float* x, const float* w, int64_t nr, int64_t K, float* y, int64_t N) {
  Lanes acc[MB][kWeightRows] = {};
  const int64_t body = K / kLanes * kLanes;
  if (nr == kWeightRows) {
    for (int64_t k = 0; k < body; k += kLanes) {
      const Lanes w0 = load(w + k), w1 = load(w + K + k), w2 = load(w + 2 * K + k), w3 = load(w + 3 * K + k);
      for (int m = 0; m < MB; ++m) {
        const Lanes xv = load(x + m * K + k);
        acc[m][0] += xv * w0;
        acc[m][1] += xv * w1;
        acc[m][2] += xv * w2;
        acc[m][3] += xv * w3;
      }
    }
  } else {
    for (int64_t k = 0; k < body; k += kLanes) {
      for (int64_t j = 0; j < nr; ++j) {
        const Lanes wj = load(w + j * K + k);
        for (int m = 0; m < MB; ++m) acc[m][j] += load(x + m * K + k) * wj;
      }
    }
  }
  for (int m = 0; m < MB; ++m) {
    for (int64_t j = 0; j < nr; ++j) {
      float s = sum_lanes(acc[m][j]);
      for (int64_t k = body; k < K; ++k) s += x[m * K + k] * w[j * K + k];
      y[m * N + j] = s;
    }
  }
}

}  // namespace

void matvec(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
  const int64_t blocks = (N + kWeightRows - 1) / kWeightRows;
  // Threads own blocks of weight rows: each weight byte is read by one thread, once.
#pragma omp parallel for schedule(static) if (N * K >= (1 << 16))
  for (int64_t nb = 0; nb < blocks; ++nb) {
    const int64_t n0 = nb * kWeightRows, nr = std::min(kWeightRows, N - n0);
    const float* wb = w + n0 * K;
    // Rows past the first tile read this block's weight rows again, from cache.
    for (int64_t m0 = 0; m0 < M; m0 += kRowsPerTile) {
      const int64_t mb = std::min(kRowsPerTile, M - m0);
      const float* xm = x + m0 * K;
      float* ym = y + m0 * N + n0;
      switch (mb) {
        case 1: tile<1>(xm, wb, nr, K, ym, N); break;
        case 2: tile<2>(xm, wb, nr, K, ym, N); break;
        case 3: tile<3>(xm, wb, nr, K, ym, N); break;
        default: tile<4>(xm, wb, nr, K, ym, N); break;
      }
      if (bias) {
        for (int64_t m = 0; m < mb; ++m) {
          for (int64_t j = 0; j < nr; ++j) ym[m * N + j] += bias[n0 + j];
        }
      }
    }
  }
}

}  // namespace shardlab
