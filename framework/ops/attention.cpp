#include "framework/ops/attention.h"

#include <cmath>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/matmul.h"

namespace shardlab::ops {
namespace {

// Strided views into the fused buffers for one query group g (heads n = k * G + g).
struct AttentionGeometry {
  int64_t B, T, N, K, H, G, C;  // C = (N + 2K) * H, the fused row width

  // Query head (k, g) rows: [B, K, T, H] starting at column g * H of qkv (or of y / dy
  // when `row` = N * H, the output row width).
  MatView q(int64_t row) const { return MatView::batched({B, K, T, H}, {T * row, G * H, row, 1}); }
  MatView kv() const { return MatView::batched({B, K, T, H}, {T * C, H, C, 1}); }
  MatView kv_t() const { return MatView::batched({B, K, H, T}, {T * C, H, 1, C}); }
  MatView scores() const { return MatView::batched({B, K, T, T}, {K * T * T, T * T, T, 1}); }
  MatView scores_t() const { return MatView::batched({B, K, T, T}, {K * T * T, T * T, 1, T}); }
  int64_t q_offset(int64_t g) const { return g * H; }
  int64_t k_offset() const { return N * H; }
  int64_t v_offset() const { return (N + K) * H; }
  int64_t scores_size() const { return B * K * T * T; }
};

// In place: row i of each [T, T] block becomes softmax(s[i, 0..i]) and zeros after.
void causal_softmax_rows(float* s, int64_t blocks, int64_t T) {
#pragma omp parallel for collapse(2) if (blocks * T > 64)
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t i = 0; i < T; ++i) {
      float* row = s + (b * T + i) * T;
      float m = row[0];
      for (int64_t j = 1; j <= i; ++j) m = std::max(m, row[j]);
      float z = 0.0f;
      for (int64_t j = 0; j <= i; ++j) {
        row[j] = std::exp(row[j] - m);
        z += row[j];
      }
      const float inv = 1.0f / z;
#pragma omp simd
      for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
      for (int64_t j = i + 1; j < T; ++j) row[j] = 0.0f;
    }
  }
}

// In place: dp becomes dS = P * (dP - rowsum(dP * P)), causal rows only.
void softmax_backward_rows(float* dp, const float* p, int64_t blocks, int64_t T) {
#pragma omp parallel for collapse(2) if (blocks * T > 64)
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t i = 0; i < T; ++i) {
      float* d = dp + (b * T + i) * T;
      const float* pr = p + (b * T + i) * T;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j <= i; ++j) dot += d[j] * pr[j];
#pragma omp simd
      for (int64_t j = 0; j <= i; ++j) d[j] = pr[j] * (d[j] - dot);
      for (int64_t j = i + 1; j < T; ++j) d[j] = 0.0f;
    }
  }
}

}  // namespace

Tensor causal_attention(const Tensor& qkv, int n_heads, int n_kv_heads) {
  SL_ASSERT(qkv.ndim() == 3 && n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
            "causal_attention: qkv " + shape_str(qkv.shape()) + " heads " + std::to_string(n_heads) + "/" +
                std::to_string(n_kv_heads));
  const int64_t N = n_heads, K = n_kv_heads, C = qkv.dim(2);
  SL_ASSERT(C % (N + 2 * K) == 0, "causal_attention: width " + std::to_string(C) + " vs heads");
  const AttentionGeometry a{qkv.dim(0), qkv.dim(1), N, K, C / (N + 2 * K), N / K, C};
  const int64_t out_row = N * a.H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.H));

  Tensor y = Tensor::empty({a.B, a.T, out_row});
  Tensor probs = Tensor::empty({a.G * a.scores_size()});  // [G, B, K, T, T]
  const float* base = qkv.data();
  for (int64_t g = 0; g < a.G; ++g) {
    float* p = probs.data() + g * a.scores_size();
    matmul_raw(base + a.q_offset(g), a.q(C), base + a.k_offset(), a.kv_t(), p, a.scores(), {.alpha = scale});
    causal_softmax_rows(p, a.B * a.K, a.T);
    matmul_raw(p, a.scores(), base + a.v_offset(), a.kv(), y.data() + a.q_offset(g), a.q(out_row));
  }

  return record(y, "causal_attention", {qkv}, [qkv, probs, a, scale, out_row](const Tensor& gy) {
    Tensor gqkv = Tensor::empty(qkv.shape());
    Tensor dp = Tensor::empty({a.scores_size()});
    const float* base = qkv.data();
    float* out = gqkv.data();
    for (int64_t g = 0; g < a.G; ++g) {
      const float* p = probs.data() + g * a.scores_size();
      const float* dy = gy.data() + a.q_offset(g);
      const bool acc = g > 0;  // k and v gradients sum over the heads of a group
      // dV += P^T dY ; dP = dY V^T ; dS = softmax'(dP) ; dQ = s dS K ; dK += s dS^T Q
      matmul_raw(p, a.scores_t(), dy, a.q(out_row), out + a.v_offset(), a.kv(), {.accumulate = acc});
      matmul_raw(dy, a.q(out_row), base + a.v_offset(), a.kv_t(), dp.data(), a.scores());
      softmax_backward_rows(dp.data(), p, a.B * a.K, a.T);
      matmul_raw(dp.data(), a.scores(), base + a.k_offset(), a.kv(), out + a.q_offset(g), a.q(a.C),
                 {.alpha = scale});
      matmul_raw(dp.data(), a.scores_t(), base + a.q_offset(g), a.q(a.C), out + a.k_offset(), a.kv(),
                 {.alpha = scale, .accumulate = acc});
    }
    return std::vector<Tensor>{gqkv};
  });
}

Tensor softmax(const Tensor& x) {
  const int64_t D = x.dim(-1), rows = x.numel() / D;
  Tensor y = Tensor::empty(x.shape());
  const float* px = x.data();
  float* py = y.data();
#pragma omp parallel for if (rows > 64)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = px + r * D;
    float* out = py + r * D;
    float m = in[0];
    for (int64_t j = 1; j < D; ++j) m = std::max(m, in[j]);
    float z = 0.0f;
    for (int64_t j = 0; j < D; ++j) z += (out[j] = std::exp(in[j] - m));
    for (int64_t j = 0; j < D; ++j) out[j] /= z;
  }
  return record(y, "softmax", {x}, [y, D, rows](const Tensor& gy) {
    Tensor gx = Tensor::empty(y.shape());
    const float *p = y.data(), *g = gy.data();
    float* o = gx.data();
#pragma omp parallel for if (rows > 64)
    for (int64_t r = 0; r < rows; ++r) {
      float dot = 0.0f;
      for (int64_t j = 0; j < D; ++j) dot += g[r * D + j] * p[r * D + j];
      for (int64_t j = 0; j < D; ++j) o[r * D + j] = p[r * D + j] * (g[r * D + j] - dot);
    }
    return std::vector<Tensor>{gx};
  });
}

}  // namespace shardlab::ops
