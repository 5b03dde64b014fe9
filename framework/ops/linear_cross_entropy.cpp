#include "framework/ops/linear_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/fast_math.h"
#include "framework/ops/loss.h"
#include "framework/ops/matmul.h"

namespace shardlab::ops {
namespace {

// Rows (forward) or vocabulary columns (backward) per chunk: `other` of the chunk's
// other dim make at most `chunk_bytes` of fp32 logits, and at least one.
int64_t chunk_extent(int64_t chunk_bytes, int64_t other, int64_t whole) {
  return std::clamp<int64_t>(chunk_bytes / (static_cast<int64_t>(sizeof(float)) * other), 1, whole);
}

}  // namespace

bool linear_cross_entropy_saves_memory(int64_t rows, int64_t vocab, int64_t chunk_bytes) {
  return rows * vocab * static_cast<int64_t>(sizeof(float)) > chunk_bytes;
}

void merge_row_statistics(std::span<const float> gathered, int64_t shards, std::span<float> out) {
  const int64_t R = static_cast<int64_t>(out.size()) / 3;
  SL_ASSERT(static_cast<int64_t>(gathered.size()) == shards * 3 * R, "merge_row_statistics: " +
                                                                         std::to_string(gathered.size()) + " floats for " +
                                                                         std::to_string(shards) + " shards of " +
                                                                         std::to_string(R) + " rows");
  for (int64_t r = 0; r < R; ++r) {
    float m = gathered[r];
    for (int64_t i = 1; i < shards; ++i) m = std::max(m, gathered[i * 3 * R + r]);
    float sum = 0.0f, target = 0.0f;
    for (int64_t i = 0; i < shards; ++i) {
      const float* s = gathered.data() + i * 3 * R;
      sum += s[R + r] * fast_exp(s[r] - m);
      target += s[2 * R + r];
    }
    out[r] = m;
    out[R + r] = sum;
    out[2 * R + r] = target;
  }
}

Tensor linear_cross_entropy(const Tensor& x, const Tensor& w, std::span<const int32_t> targets, double denominator,
                            const LinearCrossEntropyOptions& options) {
  SL_ASSERT(x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1),
            "linear_cross_entropy: x " + shape_str(x.shape()) + " with weight " + shape_str(w.shape()));
  const int64_t R = x.dim(0), D = x.dim(1), V = w.dim(0);
  const int64_t first = options.shard.first, vocab = options.shard.vocab > 0 ? options.shard.vocab : V;
  SL_ASSERT(static_cast<int64_t>(targets.size()) == R,
            "linear_cross_entropy: " + std::to_string(targets.size()) + " targets for " + std::to_string(R) + " rows");
  SL_ASSERT(first >= 0 && first + V <= vocab, "linear_cross_entropy: shard rows [" + std::to_string(first) + ", " +
                                                  std::to_string(first + V) + ") outside vocab " + std::to_string(vocab));
  SL_ASSERT(options.shard.combine || vocab == V, "linear_cross_entropy: a vocabulary shard needs a combine");
  int64_t valid = 0;
  for (int32_t t : targets) {
    SL_ASSERT(t == kIgnoreIndex || (t >= 0 && t < vocab), "target " + std::to_string(t) + " outside vocab " +
                                                              std::to_string(vocab));
    valid += t != kIgnoreIndex;
  }
  const double denom = denominator > 0.0 ? denominator : std::max<int64_t>(valid, 1);
  // The column of row r's target in this shard, or -1.
  const auto local_target = [first, V](int32_t t) -> int64_t {
    return t != kIgnoreIndex && t >= first && t < first + V ? t - first : -1;
  };

  const ComputePrecision precision = compute_precision();
  std::vector<float> stats(3 * R, 0.0f);  // [max; sum of exp(z - max); target logit]
  {
    const MatmulOperand xo(x, precision), wo(w, precision);
    const int64_t rows = chunk_extent(options.chunk_bytes, V, R);
    Tensor chunk = Tensor::empty({rows, V});
    float* z = chunk.data();
    for (int64_t r0 = 0; r0 < R; r0 += rows) {
      const int64_t n = std::min(rows, R - r0);
      matmul_raw(xo, r0 * D, MatView::matrix(n, D, D), wo, 0, MatView::matrix(D, V, D, /*trans=*/true), z,
                 MatView::matrix(n, V, V));
#pragma omp parallel for if (n > 16)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = r0 + i, col = local_target(targets[r]);
        if (col >= 0) stats[2 * R + r] = z[i * V + col];
        const SoftmaxStats st = softmax_row(z + i * V, z + i * V, V);
        stats[r] = st.max;
        stats[R + r] = st.sum;
      }
    }
  }
  if (options.shard.combine) options.shard.combine(stats);

  std::vector<double> row_loss(R, 0.0);
  std::vector<float> row_max(stats.begin(), stats.begin() + R), inv_sum(R);
  for (int64_t r = 0; r < R; ++r) {
    inv_sum[r] = 1.0f / stats[R + r];
    if (targets[r] != kIgnoreIndex) row_loss[r] = -(stats[2 * R + r] - stats[r] - std::log(stats[R + r]));
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  Tensor loss = Tensor::full({}, static_cast<float>(total / denom));

  std::vector<int64_t> cols(R);
  for (int64_t r = 0; r < R; ++r) cols[r] = local_target(targets[r]);
  std::vector<bool> ignored(R);
  for (int64_t r = 0; r < R; ++r) ignored[r] = targets[r] == kIgnoreIndex;
  return record(loss, "linear_cross_entropy", {x, w},
                [x, w, cols = std::move(cols), ignored = std::move(ignored), row_max = std::move(row_max),
                 inv_sum = std::move(inv_sum), denom, precision, chunk_bytes = options.chunk_bytes, R, D,
                 V](const Tensor& gl) {
                  const float s = static_cast<float>(gl.item() / denom);
                  const MatmulOperand xo(x, precision), wo(w, precision);
                  Tensor gx = x.requires_grad() ? Tensor::empty({R, D}) : Tensor();
                  Tensor gw = w.requires_grad() ? Tensor::empty({V, D}) : Tensor();
                  const int64_t width = chunk_extent(chunk_bytes, R, V);
                  Tensor chunk = Tensor::empty({R, width});
                  float* g = chunk.data();
                  for (int64_t v0 = 0; v0 < V; v0 += width) {
                    const int64_t n = std::min(width, V - v0);
                    // The chunk's logits, then (softmax - onehot) * s in place: the unfused
                    // ops' arithmetic, element for element.
                    matmul_raw(xo, 0, MatView::matrix(R, D, D), wo, v0 * D, MatView::matrix(D, n, D, /*trans=*/true),
                               g, MatView::matrix(R, n, n));
#pragma omp parallel for if (R > 16)
                    for (int64_t r = 0; r < R; ++r) {
                      float* row = g + r * n;
                      const float rs = ignored[r] ? 0.0f : s, m = row_max[r], inv = inv_sum[r];
#pragma omp simd
                      for (int64_t j = 0; j < n; ++j) row[j] = fast_exp(row[j] - m) * inv * rs;
                      const int64_t col = cols[r] - v0;
                      if (col >= 0 && col < n) row[col] -= rs;
                    }
                    const MatmulOperand go(chunk, precision);
                    if (gx.defined()) {  // gx[R, D] += g[R, n] · w[v0:v0+n, D]
                      matmul_raw(go, 0, MatView::matrix(R, n, n), wo, v0 * D, MatView::matrix(n, D, D), gx.data(),
                                 MatView::matrix(R, D, D), {.accumulate = v0 > 0});
                    }
                    if (gw.defined()) {  // gw[v0:v0+n, D] = g^T[n, R] · x[R, D]
                      matmul_raw(go, 0, MatView::matrix(n, R, n, /*trans=*/true), xo, 0, MatView::matrix(R, D, D),
                                 gw.data() + v0 * D, MatView::matrix(n, D, D));
                    }
                  }
                  // A zero-bubble pipeline's input-gradient pass takes the weight's later;
                  // it is computed already (recomputing it later would mean the logits again).
                  if (gw.defined() && defer_gradient(w, [gw] { return gw; })) gw = Tensor();
                  return std::vector<Tensor>{gx, gw};
                });
}

}  // namespace shardlab::ops
