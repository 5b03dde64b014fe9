#include "framework/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/bf16.h"
#include "framework/ops/fast_math.h"
#include "framework/ops/matmul.h"

namespace shardlab::ops {
namespace {

// Causal attention is computed in blocks of query rows: block [r0, r1) only needs keys
// [0, r1), so the scores above the diagonal block are never computed (about 40% of the
// QK^T and PV work at T = 256).
constexpr int64_t kRowBlock = kAttentionRowBlock;

// Geometry of the fused buffers. Query head n = k * G + g: for a fixed group index g
// the K heads are evenly strided, so one batched matmul covers [B, K] at once.
struct AttentionGeometry {
  int64_t B, T, N, K, H, G, C;  // C = (N + 2K) * H, the fused row width

  int64_t blocks() const { return (T + kRowBlock - 1) / kRowBlock; }
  int64_t row_begin(int64_t r) const { return r * kRowBlock; }
  int64_t row_end(int64_t r) const { return std::min(T, (r + 1) * kRowBlock); }
  // Query rows [r0, r1) of head (k, g), in a buffer of row width `row` (C for qkv, N*H for y).
  MatView q(int64_t rows, int64_t row) const { return MatView::batched({B, K, rows, H}, {T * row, G * H, row, 1}); }
  MatView kv(int64_t rows) const { return MatView::batched({B, K, rows, H}, {T * C, H, C, 1}); }
  MatView kv_t(int64_t rows) const { return MatView::batched({B, K, H, rows}, {T * C, H, 1, C}); }
  MatView scores(int64_t rows, int64_t cols) const {
    return MatView::batched({B, K, rows, cols}, {K * rows * cols, rows * cols, cols, 1});
  }
  MatView scores_t(int64_t rows, int64_t cols) const {  // the transpose of scores(rows, cols)
    return MatView::batched({B, K, cols, rows}, {K * rows * cols, rows * cols, 1, cols});
  }
  int64_t scores_size(int64_t r) const { return B * K * (row_end(r) - row_begin(r)) * row_end(r); }
  int64_t largest_scores() const {
    int64_t n = 0;
    for (int64_t r = 0; r < blocks(); ++r) n = std::max(n, scores_size(r));
    return n;
  }
  int64_t group_size() const {  // probabilities kept per query group: all blocks
    int64_t n = 0;
    for (int64_t r = 0; r < blocks(); ++r) n += scores_size(r);
    return n;
  }
  int64_t k_offset() const { return N * H; }
  int64_t v_offset() const { return (N + K) * H; }
};

// In place on a [blocks, rows, cols] buffer whose row i is query position r0 + i: softmax
// over keys 0..r0+i, zeros after. Then each row is stored as the P V matmul reads it, while
// it is in cache: converted into `out` (bf16 kernels), or rounded to bf16 in place (`round`).
void causal_softmax_rows(float* s, int64_t blocks, int64_t rows, int64_t cols, int64_t r0, Bf16* out, bool round) {
#pragma omp parallel for collapse(2) if (blocks * rows > 64)
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t i = 0; i < rows; ++i) {
      float* row = s + (b * rows + i) * cols;
      const int64_t last = r0 + i;
      softmax_row(row, row, last + 1);
      for (int64_t j = last + 1; j < cols; ++j) row[j] = 0.0f;
      if (out != nullptr) {
        uint16_t* o = reinterpret_cast<uint16_t*>(out + (b * rows + i) * cols);
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) o[j] = to_bf16(row[j]).bits;
      } else if (round) {
#pragma omp simd
        for (int64_t j = 0; j <= last; ++j) row[j] = round_bf16(row[j]);
      }
    }
  }
}

// In place: dp becomes dS = P * (dP - rowsum(dP * P)), on the causal part of each row, with
// P as the forward kept it: fp32 `p32`, or bf16 `p16` widened row by row.
void softmax_backward_rows(float* dp, const float* p32, const Bf16* p16, int64_t blocks, int64_t rows, int64_t cols,
                           int64_t r0) {
#pragma omp parallel if (blocks * rows > 64)
  {
    std::vector<float> widened(p16 != nullptr ? cols : 0);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t row = (b * rows + i) * cols, last = r0 + i;
        float* d = dp + row;
        const float* pr = p32 + row;
        if (p16 != nullptr) {  // inline: the bulk to_float would open a parallel region per row
#pragma omp simd
          for (int64_t j = 0; j <= last; ++j) widened[j] = to_float(p16[row + j]);
          pr = widened.data();
        }
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j <= last; ++j) dot += d[j] * pr[j];
#pragma omp simd
        for (int64_t j = 0; j <= last; ++j) d[j] = pr[j] * (d[j] - dot);
        for (int64_t j = last + 1; j < cols; ++j) d[j] = 0.0f;
      }
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
  // Scores and the softmax are fp32; the matmuls read their operands in the thread's
  // precision (bf16 Q, K, V and P under a bf16 policy). The probabilities, per group and
  // row block [B, K, rows, r1], are kept for backward as P V multiplied them: bf16 under
  // oneDNN's bf16 kernels (half the bytes, converted once), fp32 otherwise.
  const ComputePrecision precision = compute_precision();
  const MatmulOperand qkv_in(qkv, precision);
  MatmulOperand probs = MatmulOperand::allocate(a.G * a.group_size(), precision);
  Tensor scores = probs.f32() != nullptr ? Tensor() : Tensor::empty({a.largest_scores()});  // fp32, one block
  int64_t p = 0;  // offset of this block's probabilities
  for (int64_t g = 0; g < a.G; ++g) {
    for (int64_t r = 0; r < a.blocks(); ++r) {
      const int64_t r0 = a.row_begin(r), r1 = a.row_end(r), rows = r1 - r0;
      float* block = probs.f32() != nullptr ? probs.f32() + p : scores.data();
      matmul_raw(qkv_in, r0 * C + g * a.H, a.q(rows, C), qkv_in, a.k_offset(), a.kv_t(r1), block, a.scores(rows, r1),
                 {.alpha = scale});
      causal_softmax_rows(block, a.B * a.K, rows, r1, r0, probs.bf16() != nullptr ? probs.bf16() + p : nullptr,
                          probs.rounded());
      matmul_raw(probs, p, a.scores(rows, r1), qkv_in, a.v_offset(), a.kv(r1), y.data() + r0 * out_row + g * a.H,
                 a.q(rows, out_row));
      p += a.scores_size(r);
    }
  }

  // Backward keeps Q, K, V as the matmuls read them (bf16 under a bf16 policy), not qkv.
  return record(y, "causal_attention", {qkv}, [qkv_in, qkv_shape = qkv.shape(), probs, a, scale, out_row,
                                               precision](const Tensor& gy) {
    // Not zeroed: the last row block sees every key, so running the blocks last to first,
    // group 0's last block writes all of dK and dV and every later block accumulates. dQ
    // rows are written exactly once.
    Tensor gqkv = Tensor::empty(qkv_shape);
    std::vector<int64_t> probs_offset(a.blocks());  // of row block r within a group
    for (int64_t r = 0, offset = 0; r < a.blocks(); offset += a.scores_size(r), ++r) probs_offset[r] = offset;
    Tensor dp = Tensor::empty({a.largest_scores()});
    const MatmulOperand gy_in(gy, precision);
    float* out = gqkv.data();
    for (int64_t g = 0; g < a.G; ++g) {
      for (int64_t r = a.blocks() - 1; r >= 0; --r) {
        const int64_t r0 = a.row_begin(r), r1 = a.row_end(r), rows = r1 - r0;
        const bool first = g == 0 && r == a.blocks() - 1;
        const int64_t p = g * a.group_size() + probs_offset[r];
        Tensor ds = dp.rows(0, a.scores_size(r));
        const int64_t dy = r0 * out_row + g * a.H, q = r0 * a.C + g * a.H;
        // dV += P^T dY ; dP = dY V^T ; dS = softmax'(dP) ; dQ = s dS K ; dK += s dS^T Q
        matmul_raw(probs, p, a.scores_t(rows, r1), gy_in, dy, a.q(rows, out_row), out + a.v_offset(), a.kv(r1),
                   {.accumulate = !first});
        matmul_raw(gy_in, dy, a.q(rows, out_row), qkv_in, a.v_offset(), a.kv_t(r1), ds.data(), a.scores(rows, r1));
        softmax_backward_rows(ds.data(), probs.f32() != nullptr ? probs.f32() + p : nullptr,
                              probs.bf16() != nullptr ? probs.bf16() + p : nullptr, a.B * a.K, rows, r1, r0);
        const MatmulOperand ds_in(ds, precision);
        matmul_raw(ds_in, 0, a.scores(rows, r1), qkv_in, a.k_offset(), a.kv(r1), out + q, a.q(rows, a.C),
                   {.alpha = scale});
        matmul_raw(ds_in, 0, a.scores_t(rows, r1), qkv_in, q, a.q(rows, a.C), out + a.k_offset(), a.kv(r1),
                   {.alpha = scale, .accumulate = !first});
      }
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
  for (int64_t r = 0; r < rows; ++r) softmax_row(px + r * D, py + r * D, D);
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
