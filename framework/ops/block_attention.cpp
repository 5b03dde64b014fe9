#include "framework/ops/block_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/fast_math.h"
#include "framework/ops/matmul.h"

namespace shardlab::ops {
namespace {

// Query rows per block: bounds the scores kept at once to [B, K, 128, keys] and lets a
// block on the diagonal stop at its last visible key.
constexpr int64_t kQueryBlockRows = 128;
constexpr float kNoMax = -std::numeric_limits<float>::infinity();

// Views of the fused buffers for the query heads of one group g: query head n = k * G + g,
// so for fixed g the K kv heads are evenly strided and one batched matmul covers [B, K].
struct Views {
  AttentionHeads h;
  int64_t Tq, Tk;

  int64_t G() const { return h.N / h.K; }
  int64_t C() const { return h.qkv_width(); }
  int64_t W() const { return h.kv_width(); }
  // Query rows (of qkv or gqkv) and output rows (of y or gy), for group g at the offset given.
  MatView q(int64_t rows) const { return MatView::batched({h.B, h.K, rows, h.H}, {Tq * C(), G() * h.H, C(), 1}); }
  MatView out(int64_t rows) const {
    return MatView::batched({h.B, h.K, rows, h.H}, {Tq * h.out_width(), G() * h.H, h.out_width(), 1});
  }
  // Key or value rows of a kv block, and the keys transposed.
  MatView kv(int64_t cols) const { return MatView::batched({h.B, h.K, cols, h.H}, {Tk * W(), h.H, W(), 1}); }
  MatView kv_t(int64_t cols) const { return MatView::batched({h.B, h.K, h.H, cols}, {Tk * W(), h.H, 1, W()}); }
  MatView scores(int64_t rows, int64_t cols) const {
    return MatView::batched({h.B, h.K, rows, cols}, {h.K * rows * cols, rows * cols, cols, 1});
  }
  MatView scores_t(int64_t rows, int64_t cols) const {
    return MatView::batched({h.B, h.K, cols, rows}, {h.K * rows * cols, rows * cols, 1, cols});
  }
  // Per-row statistics [B, N, Tq] of query row `row` of head (b, k, g).
  int64_t stat(int64_t b, int64_t k, int64_t g, int64_t row) const { return (b * h.N + k * G() + g) * Tq + row; }
};

// The keys of span `kv` that query rows [i0, i1) of span `q` may see: the first `cols`
// (0: none).
int64_t visible_keys(const PositionSpan& q, int64_t i1, const PositionSpan& kv) {
  return std::clamp<int64_t>(q.position + i1 - kv.position, 0, kv.length);
}
// Of those, the ones query row i of span q sees.
int64_t visible_keys_of_row(const PositionSpan& q, int64_t i, const PositionSpan& kv, int64_t cols) {
  return std::clamp<int64_t>(q.position + i + 1 - kv.position, 0, cols);
}

void check_spans(const std::vector<PositionSpan>& spans, int64_t rows, const char* what) {
  for (const PositionSpan& s : spans) {
    SL_ASSERT(s.row >= 0 && s.length > 0 && s.row + s.length <= rows && s.position >= 0,
              std::string("block attention: a ") + what + " span outside its " + std::to_string(rows) + " rows");
  }
}

// Runs f(i0, i1, cols) for each block of query rows of q that sees keys of kv.
template <typename F>
void for_row_blocks(const PositionSpan& q, const PositionSpan& kv, F&& f) {
  for (int64_t i0 = 0; i0 < q.length; i0 += kQueryBlockRows) {
    const int64_t i1 = std::min(q.length, i0 + kQueryBlockRows);
    const int64_t cols = visible_keys(q, i1, kv);
    if (cols > 0) f(i0, i1, cols);
  }
}

}  // namespace

AttentionHeads AttentionHeads::of(const Tensor& qkv, int n_heads, int n_kv_heads) {
  SL_ASSERT(qkv.ndim() == 3 && n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0 &&
                qkv.dim(2) % (n_heads + 2 * n_kv_heads) == 0,
            "attention: qkv " + shape_str(qkv.shape()) + " heads " + std::to_string(n_heads) + "/" +
                std::to_string(n_kv_heads));
  return {qkv.dim(0), n_heads, n_kv_heads, qkv.dim(2) / (n_heads + 2 * n_kv_heads)};
}

Tensor key_values(const Tensor& qkv, const AttentionHeads& h) {
  const int64_t rows = qkv.dim(0) * qkv.dim(1), C = h.qkv_width(), W = h.kv_width();
  Tensor kv = Tensor::empty({qkv.dim(0), qkv.dim(1), W});
  for (int64_t r = 0; r < rows; ++r) std::memcpy(kv.data() + r * W, qkv.data() + r * C + h.N * h.H, W * sizeof(float));
  return kv;
}

void add_key_value_grad(const Tensor& gkv, const AttentionHeads& h, Tensor& gqkv) {
  const int64_t rows = gqkv.dim(0) * gqkv.dim(1), C = h.qkv_width(), W = h.kv_width();
  SL_ASSERT(gkv.numel() == rows * W, "add_key_value_grad: " + shape_str(gkv.shape()) + " for " + shape_str(gqkv.shape()));
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = gqkv.data() + r * C + h.N * h.H;
    const float* src = gkv.data() + r * W;
#pragma omp simd
    for (int64_t j = 0; j < W; ++j) dst[j] += src[j];
  }
}

OnlineAttention::OnlineAttention(const AttentionHeads& heads, const Tensor& qkv)
    : h_(heads), precision_(compute_precision()), q_(qkv, precision_), Tq_(qkv.dim(1)),
      out_(Tensor::zeros({heads.B, qkv.dim(1), heads.out_width()})),
      max_(Tensor::full({heads.B, heads.N, qkv.dim(1)}, kNoMax)), sum_(Tensor::zeros({heads.B, heads.N, qkv.dim(1)})) {}

void OnlineAttention::attend(const std::vector<PositionSpan>& q_spans, const Tensor& kv,
                             const std::vector<PositionSpan>& kv_spans) {
  const Views v{h_, Tq_, kv.dim(1)};
  check_spans(q_spans, v.Tq, "query");
  check_spans(kv_spans, v.Tk, "key");
  const float scale = 1.0f / std::sqrt(static_cast<float>(h_.H));
  const MatmulOperand& q_in = q_;
  const MatmulOperand kv_in(kv, precision_);
  const int64_t B = h_.B, K = h_.K, H = h_.H, NH = h_.out_width();
  for (const PositionSpan& q : q_spans) {
    for (const PositionSpan& k : kv_spans) {
      for_row_blocks(q, k, [&](int64_t i0, int64_t i1, int64_t cols) {
        const int64_t rows = i1 - i0;
        Tensor p = Tensor::empty({B * K * rows * cols});  // scores, then probabilities
        for (int64_t g = 0; g < v.G(); ++g) {
          matmul_raw(q_in, (q.row + i0) * v.C() + g * H, v.q(rows), kv_in, k.row * v.W(), v.kv_t(cols), p.data(),
                     v.scores(rows, cols), {.alpha = scale});
          // Merge: m' = max(m, max_j s_j); o, l scale by exp(m - m'); p_j = exp(s_j - m').
#pragma omp parallel for collapse(2) if (B * K * rows > 64)
          for (int64_t bk = 0; bk < B * K; ++bk) {
            for (int64_t i = 0; i < rows; ++i) {
              float* row = p.data() + (bk * rows + i) * cols;
              const int64_t seen = visible_keys_of_row(q, i0 + i, k, cols);
              const int64_t stat = v.stat(bk / K, bk % K, g, q.row + i0 + i);
              if (seen == 0) {
                std::fill(row, row + cols, 0.0f);
                continue;
              }
              const float m = max_of(max_.data()[stat], row, seen);
              const float old = max_.data()[stat];
              const float alpha = old == kNoMax ? 0.0f : fast_exp(old - m);
              float z = 0.0f;
#pragma omp simd reduction(+ : z)
              for (int64_t j = 0; j < seen; ++j) z += (row[j] = fast_exp(row[j] - m));
              std::fill(row + seen, row + cols, 0.0f);
              max_.data()[stat] = m;
              sum_.data()[stat] = sum_.data()[stat] * alpha + z;
              float* o = out_.data() + ((bk / K) * v.Tq + q.row + i0 + i) * NH + ((bk % K) * v.G() + g) * H;
#pragma omp simd
              for (int64_t d = 0; d < H; ++d) o[d] *= alpha;
            }
          }
          matmul_raw(MatmulOperand(p, precision_), 0, v.scores(rows, cols), kv_in, k.row * v.W() + K * H, v.kv(cols),
                     out_.data() + (q.row + i0) * NH + g * H, v.out(rows), {.accumulate = true});
        }
      });
    }
  }
}

Tensor OnlineAttention::finish() {
  const int64_t Tq = Tq_, H = h_.H, NH = h_.out_width();
  lse_ = Tensor::empty(max_.shape());
  for (int64_t b = 0; b < h_.B; ++b) {
    for (int64_t n = 0; n < h_.N; ++n) {
      for (int64_t t = 0; t < Tq; ++t) {
        const int64_t stat = (b * h_.N + n) * Tq + t;
        const float l = sum_.data()[stat];
        SL_ASSERT(l > 0.0f, "block attention: query row " + std::to_string(t) + " never saw a key");
        lse_.data()[stat] = max_.data()[stat] + std::log(l);
        float* o = out_.data() + (b * Tq + t) * NH + n * H;
        const float inv = 1.0f / l;
        for (int64_t d = 0; d < H; ++d) o[d] *= inv;
      }
    }
  }
  return out_;
}

namespace {

// rowsum(gy * y) per [B, N, Tq]: the softmax backward's correction term.
Tensor attention_delta(const AttentionHeads& h, const Tensor& y, const Tensor& gy) {
  const int64_t T = y.dim(1), H = h.H, NH = h.out_width();
  Tensor delta = Tensor::empty({h.B, h.N, T});
  for (int64_t b = 0; b < h.B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t n = 0; n < h.N; ++n) {
        const float* a = y.data() + (b * T + t) * NH + n * H;
        const float* c = gy.data() + (b * T + t) * NH + n * H;
        float dot = 0.0f;
        for (int64_t d = 0; d < H; ++d) dot += a[d] * c[d];
        delta.data()[(b * h.N + n) * T + t] = dot;
      }
    }
  }
  return delta;
}

}  // namespace

BlockAttentionBackward::BlockAttentionBackward(const AttentionHeads& heads, const Tensor& qkv, const Tensor& y,
                                               const Tensor& lse, const Tensor& gy)
    : h_(heads), precision_(compute_precision()), q_(qkv, precision_), gy_(gy, precision_), Tq_(qkv.dim(1)),
      lse_(lse), delta_(attention_delta(heads, y, gy)) {}

void BlockAttentionBackward::block(const std::vector<PositionSpan>& q_spans, const Tensor& kv,
                                   const std::vector<PositionSpan>& kv_spans, Tensor& gqkv, Tensor& gkv) const {
  const AttentionHeads& h = h_;
  const Views v{h, Tq_, kv.dim(1)};
  check_spans(q_spans, v.Tq, "query");
  check_spans(kv_spans, v.Tk, "key");
  const ComputePrecision& precision = precision_;
  const Tensor &lse = lse_, &delta = delta_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(h.H));
  const MatmulOperand &q_in = q_, &gy_in = gy_;
  const MatmulOperand kv_in(kv, precision);
  const int64_t B = h.B, K = h.K, H = h.H, NH = h.out_width();
  for (const PositionSpan& q : q_spans) {
    for (const PositionSpan& k : kv_spans) {
      for_row_blocks(q, k, [&](int64_t i0, int64_t i1, int64_t cols) {
        const int64_t rows = i1 - i0, q_off = (q.row + i0) * v.C(), out_off = (q.row + i0) * NH;
        const int64_t k_off = k.row * v.W(), v_off = k.row * v.W() + K * H;
        Tensor p = Tensor::empty({B * K * rows * cols}), ds = Tensor::empty({B * K * rows * cols});
        for (int64_t g = 0; g < v.G(); ++g) {
          // P = exp(s QK^T - lse); dV += P^T dY; dP = dY V^T; dS = P (dP - delta);
          // dQ += s dS K; dK += s dS^T Q.
          matmul_raw(q_in, q_off + g * H, v.q(rows), kv_in, k_off, v.kv_t(cols), p.data(), v.scores(rows, cols),
                     {.alpha = scale});
          matmul_raw(gy_in, out_off + g * H, v.out(rows), kv_in, v_off, v.kv_t(cols), ds.data(), v.scores(rows, cols));
#pragma omp parallel for collapse(2) if (B * K * rows > 64)
          for (int64_t bk = 0; bk < B * K; ++bk) {
            for (int64_t i = 0; i < rows; ++i) {
              float* pr = p.data() + (bk * rows + i) * cols;
              float* dr = ds.data() + (bk * rows + i) * cols;
              const int64_t seen = visible_keys_of_row(q, i0 + i, k, cols);
              const int64_t stat = v.stat(bk / K, bk % K, g, q.row + i0 + i);
              const float m = lse.data()[stat], d = delta.data()[stat];
              for (int64_t j = 0; j < seen; ++j) {
                pr[j] = fast_exp(pr[j] - m);
                dr[j] = pr[j] * (dr[j] - d);
              }
              std::fill(pr + seen, pr + cols, 0.0f);
              std::fill(dr + seen, dr + cols, 0.0f);
            }
          }
          const MatmulOperand p_in(p, precision), ds_in(ds, precision);
          matmul_raw(p_in, 0, v.scores_t(rows, cols), gy_in, out_off + g * H, v.out(rows), gkv.data() + v_off,
                     v.kv(cols), {.accumulate = true});
          matmul_raw(ds_in, 0, v.scores(rows, cols), kv_in, k_off, v.kv(cols), gqkv.data() + q_off + g * H, v.q(rows),
                     {.alpha = scale, .accumulate = true});
          matmul_raw(ds_in, 0, v.scores_t(rows, cols), q_in, q_off + g * H, v.q(rows), gkv.data() + k_off, v.kv(cols),
                     {.alpha = scale, .accumulate = true});
        }
      });
    }
  }
}

Tensor blockwise_causal_attention(const Tensor& qkv, int n_heads, int n_kv_heads, int64_t block) {
  const AttentionHeads h = AttentionHeads::of(qkv, n_heads, n_kv_heads);
  SL_ASSERT(block > 0, "blockwise_causal_attention: block " + std::to_string(block));
  const int64_t T = qkv.dim(1);
  const std::vector<PositionSpan> all = {{.row = 0, .position = 0, .length = T}};
  std::vector<std::vector<PositionSpan>> blocks;
  for (int64_t t = 0; t < T; t += block) blocks.push_back({{.row = t, .position = t, .length = std::min(block, T - t)}});
  const Tensor kv = key_values(qkv, h);
  OnlineAttention attention(h, qkv);
  for (const auto& b : blocks) attention.attend(all, kv, b);
  Tensor y = attention.finish();
  const Tensor lse = attention.log_sum_exp();
  const ComputePrecision precision = compute_precision();
  return record(y, "blockwise_causal_attention", {qkv}, [=](const Tensor& gy) {
    const PrecisionScope scope(precision);
    const BlockAttentionBackward backward(h, qkv, y, lse, gy);
    Tensor gqkv = Tensor::zeros(qkv.shape()), gkv = Tensor::zeros(kv.shape());
    for (const auto& b : blocks) backward.block(all, kv, b, gqkv, gkv);
    add_key_value_grad(gkv, h, gqkv);
    return std::vector<Tensor>{gqkv};
  });
}

}  // namespace shardlab::ops
