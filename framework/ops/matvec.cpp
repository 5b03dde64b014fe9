#include "framework/ops/matvec.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "framework/error.h"
#include "framework/ops/lanes.h"
#include "framework/ops/parallel_balanced.h"

namespace shardlab {
namespace {

constexpr int64_t kWeightRows = 4;  // the weight rows a thread's block holds

// y[m, j] = x[m, :] . w[j, :] for MB rows of x and NR rows of w (row strides K; y's N).
// Each (m, j) accumulates lane l of k = l, l + 16, ... in order, then sum_lanes' tree and
// the ragged tail in order: the same sum whatever MB and NR. The weight rows are held in
// registers across the MB rows, and the next block's rows (`next`) are prefetched, so the
// memory streams while the FMAs of several rows run.
template <int MB, int NR>
__attribute__((always_inline)) inline void tile(const float* __restrict x, const float* __restrict w, int64_t K,
                                                float* y, int64_t N, const float* next) {
  Lanes acc[MB * NR];
#pragma GCC unroll 16
  for (int i = 0; i < MB * NR; ++i) acc[i] = Lanes{};
  const int64_t body = K / kLanes * kLanes;
  for (int64_t k = 0; k < body; k += kLanes) {
    Lanes wk[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
      wk[j] = load_lanes(w + j * K + k);
      asm("" : "+v"(wk[j]));  // one load per weight row, not one per x row
      __builtin_prefetch(next + j * K + k);
    }
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      const Lanes xk = load_lanes(x + m * K + k);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[m * NR + j] += xk * wk[j];
    }
  }
  float sums[MB * NR];
  if constexpr (MB * NR == 16) {
    const Lanes all = sum_lanes_16(acc);
    std::memcpy(sums, &all, sizeof all);
  } else {
    for (int i = 0; i < MB * NR; ++i) sums[i] = sum_lanes(acc[i]);
  }
  for (int m = 0; m < MB; ++m) {
    for (int j = 0; j < NR; ++j) {
      float s = sums[m * NR + j];
      for (int64_t k = body; k < K; ++k) s += x[m * K + k] * w[j * K + k];
      y[m * N + j] = s;
    }
  }
}

// All M rows of x against NR (<= kWeightRows) weight rows: eight rows at a time two weight
// rows each (sixteen accumulators), then four rows with four, then the rest.
template <int NR>
void block(const float* x, const float* w, int64_t M, int64_t K, float* y, int64_t N, const float* next) {
  int64_t m = 0;
  for (; m + 8 <= M; m += 8) {
    for (int j = 0; j < NR; j += 2) {
      if (j + 1 < NR) {
        tile<8, 2>(x + m * K, w + j * K, K, y + m * N + j, N, next + j * K);
      } else {
        tile<8, 1>(x + m * K, w + j * K, K, y + m * N + j, N, next + j * K);
      }
    }
  }
  if (m + 4 <= M) tile<4, NR>(x + m * K, w, K, y + m * N, N, next), m += 4;
  switch (M - m) {
    case 1: tile<1, NR>(x + m * K, w, K, y + m * N, N, next); break;
    case 2: tile<2, NR>(x + m * K, w, K, y + m * N, N, next); break;
    case 3: tile<3, NR>(x + m * K, w, K, y + m * N, N, next); break;
    default: break;
  }
}

}  // namespace

void matvec(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
  const int64_t blocks = (N + kWeightRows - 1) / kWeightRows;
  // Threads own runs of blocks of weight rows (parallel_balanced): each weight byte is read
  // by one thread, once.
  ops::parallel_balanced(blocks, N * K >= (1 << 16), [&](int64_t nb) {
    const int64_t n0 = nb * kWeightRows, nr = std::min(kWeightRows, N - n0);
    const float* wb = w + n0 * K;
    const float* next = w + std::min(n0 + kWeightRows, N - nr) * K;  // prefetched; past the end: this block
    switch (nr) {
      case 1: block<1>(x, wb, M, K, y + n0, N, next); break;
      case 2: block<2>(x, wb, M, K, y + n0, N, next); break;
      case 3: block<3>(x, wb, M, K, y + n0, N, next); break;
      default: block<4>(x, wb, M, K, y + n0, N, next); break;
    }
    if (bias) {
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t j = 0; j < nr; ++j) y[m * N + n0 + j] += bias[n0 + j];
      }
    }
  });
}

namespace {

constexpr int64_t kPanel = 16;           // outputs per panel: one register of fp32 lanes
constexpr int64_t kPrefetchAhead = 64;   // k steps ahead of the loads (4 KB of an fp32 panel)

Lanes load_panel(const float* p) { return load_lanes(p); }

Lanes load_panel(const Bf16* p) {  // 16 bf16 values widened exactly to fp32
  typedef uint16_t Halves __attribute__((vector_size(32)));
  typedef uint32_t Words __attribute__((vector_size(64)));
  Halves h;
  std::memcpy(&h, p, sizeof h);
  const Words w = __builtin_convertvector(h, Words) << 16;
  Lanes v;
  std::memcpy(&v, &w, sizeof v);
  return v;
}

// out[m, p * 16 + c] for MB rows of x (row stride K) and NP consecutive panels: MB x NP
// accumulators of 16 outputs each, one FMA per (row, panel) and k, in order of k.
template <int MB, int NP, typename W>
__attribute__((always_inline)) inline void panel_tile(const float* __restrict x, int64_t K,
                                                      const W* __restrict panel, float* out) {
  Lanes acc[MB * NP];
#pragma GCC unroll 16
  for (int i = 0; i < MB * NP; ++i) acc[i] = Lanes{};
  const int64_t stride = K * kPanel;
  for (int64_t k = 0; k < K; ++k) {
    Lanes wk[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      wk[p] = load_panel(panel + p * stride + k * kPanel);
      __builtin_prefetch(panel + p * stride + (k + kPrefetchAhead) * kPanel);
    }
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      const Lanes xk = splat_lanes(x[m * K + k]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[m * NP + p] += xk * wk[p];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MB * NP; ++i) std::memcpy(out + i * kPanel, &acc[i], sizeof(Lanes));
}

// Panels per tile (and per group of panels below): four for up to four rows, three for
// more (up to 24 accumulators, with the panels' registers within AVX-512's 32). Measured,
// 8 rows (2 threads, the benchmark's 24 weights): three panels 2.5 ms, two 2.9-3.1 ms.
constexpr int kFewRowsPanels = 4, kManyRowsPanels = 3;

// Rows [0, MB) of x against panels [p0, p0 + np), into y: as one MB x NP tile when np is
// NP, else one panel at a time (np must not exceed NP).
template <int MB, int NP, typename W>
void panel_rows(const float* x, int64_t K, const W* panels, int64_t p0, int64_t np, int64_t N, const float* bias,
                float* y) {
  float out[MB * NP * kPanel];
  const W* first = panels + p0 * K * kPanel;
  if (np == NP) {
    panel_tile<MB, NP>(x, K, first, out);
  } else {
    for (int64_t p = 0; p < np; ++p) panel_tile<MB, 1>(x, K, first + p * K * kPanel, out + p * MB * kPanel);
  }
  for (int m = 0; m < MB; ++m) {
    for (int64_t p = 0; p < np; ++p) {
      // panel_tile<MB, NP> writes (m, p) at (m * NP + p); the single-panel ones at (p * MB + m).
      const float* o = out + (np == NP ? m * NP + p : p * MB + m) * kPanel;
      const int64_t n0 = (p0 + p) * kPanel, count = std::min(kPanel, N - n0);
      for (int64_t c = 0; c < count; ++c) y[m * N + n0 + c] = o[c] + (bias ? bias[n0 + c] : 0.0f);
    }
  }
}

// Rows [m0, m0 + rows) of x (rows <= 8) against a group's NP panels.
template <int NP, typename W>
void panel_chunk(const float* x, int64_t K, const W* panels, int64_t p0, int64_t np, int64_t N, const float* bias,
                 float* y, int64_t m0, int64_t rows) {
  const float* xm = x + m0 * K;
  float* ym = y + m0 * N;
  switch (rows) {
    case 1: panel_rows<1, NP>(xm, K, panels, p0, np, N, bias, ym); break;
    case 2: panel_rows<2, NP>(xm, K, panels, p0, np, N, bias, ym); break;
    case 3: panel_rows<3, NP>(xm, K, panels, p0, np, N, bias, ym); break;
    case 4: panel_rows<4, NP>(xm, K, panels, p0, np, N, bias, ym); break;
    case 5: panel_rows<5, NP>(xm, K, panels, p0, np, N, bias, ym); break;
    case 6: panel_rows<6, NP>(xm, K, panels, p0, np, N, bias, ym); break;
    case 7: panel_rows<7, NP>(xm, K, panels, p0, np, N, bias, ym); break;
    default: panel_rows<8, NP>(xm, K, panels, p0, np, N, bias, ym); break;
  }
}

template <typename W>
void multiply_panels(const float* x, const W* panels, int64_t panel_count, const float* bias, float* y, int64_t M,
                     int64_t N, int64_t K) {
  const int64_t group = M <= 4 ? kFewRowsPanels : kManyRowsPanels;
  const int64_t groups = (panel_count + group - 1) / group;
  // A group's rows go in chunks of at most eight, as even as they can be (12 rows: 6 + 6,
  // not 8 + 4), so that every chunk takes the group's panels in one tile; its panels come
  // from memory for the first chunk and from cache after.
  const int64_t chunks = (M + 7) / 8;
  // Threads own contiguous runs of panel groups (parallel_balanced: the faster thread takes
  // the slower one's last groups).
  ops::parallel_balanced(groups, N * K >= (1 << 16), [&](int64_t g) {
    const int64_t p0 = g * group, np = std::min(group, panel_count - p0);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t m0 = M * c / chunks, rows = M * (c + 1) / chunks - m0;
      if (group == kFewRowsPanels) {
        panel_chunk<kFewRowsPanels>(x, K, panels, p0, np, N, bias, y, m0, rows);
      } else {
        panel_chunk<kManyRowsPanels>(x, K, panels, p0, np, N, bias, y, m0, rows);
      }
    }
  });
}

}  // namespace

MatvecPanels::MatvecPanels(const float* w, int64_t N, int64_t K, bool bf16)
    : n_(N), k_(K), panels_((N + kPanel - 1) / kPanel), bf16_(bf16) {
  SL_ASSERT(N > 0 && K > 0, "MatvecPanels of an empty weight");
  const auto fill = [&](auto* out, auto convert) {
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels_; ++p) {
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t c = 0; c < kPanel; ++c) {
          const int64_t n = p * kPanel + c;
          out[(p * K + k) * kPanel + c] = convert(n < N ? w[n * K + k] : 0.0f);
        }
      }
    }
  };
  if (bf16) {
    bf16s_ = Bf16Array(panels_ * K * kPanel);
    fill(bf16s_.data(), [](float v) { return to_bf16(v); });
  } else {
    f32_ = Tensor::empty({panels_, K, kPanel});
    fill(f32_.data(), [](float v) { return v; });
  }
}

int64_t MatvecPanels::bytes() const { return panels_ * k_ * kPanel * (bf16_ ? 2 : 4); }

void MatvecPanels::multiply(const float* x, const float* bias, float* y, int64_t M) const {
  if (!bf16_) return multiply_panels(x, f32_.data(), panels_, bias, y, M, n_, k_);
  thread_local std::vector<float> rounded;  // x as a bf16 operand; kept between calls
  rounded.resize(static_cast<size_t>(M * k_));
  round_bf16(x, rounded.data(), M * k_);
  multiply_panels(rounded.data(), bf16s_.data(), panels_, bias, y, M, n_, k_);
}

}  // namespace shardlab
