#include "parallel/tensor/vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/fast_math.h"
#include "framework/ops/loss.h"
#include "parallel/comm/collectives.h"

namespace shardlab::parallel {

Tensor vocab_parallel_cross_entropy(const AxisGroup& tensor, const Tensor& logits, std::span<const int32_t> targets,
                                    int64_t first, double denominator) {
  const int64_t Vl = logits.dim(-1), R = logits.numel() / Vl, t = tensor.size();
  SL_ASSERT(static_cast<int64_t>(targets.size()) == R, "vocab_parallel_cross_entropy: " +
                                                           std::to_string(targets.size()) + " targets for logits " +
                                                           shape_str(logits.shape()));
  int64_t valid = 0;
  for (int32_t target : targets) {
    SL_ASSERT(target == ops::kIgnoreIndex || (target >= 0 && target < Vl * t),
              "target " + std::to_string(target) + " outside vocab " + std::to_string(Vl * t));
    valid += target != ops::kIgnoreIndex;
  }
  const double denom = denominator > 0.0 ? denominator : std::max<int64_t>(valid, 1);
  const float* x = logits.data();

  // The row maxima over the whole vocabulary: every rank's local maxima, gathered.
  std::vector<float> local_max(R), all_max(R * t);
  for (int64_t r = 0; r < R; ++r) local_max[r] = *std::max_element(x + r * Vl, x + (r + 1) * Vl);
  all_gather(tensor, local_max, all_max);
  std::vector<float> m(R);
  for (int64_t r = 0; r < R; ++r) {
    m[r] = all_max[r];
    for (int64_t i = 1; i < t; ++i) m[r] = std::max(m[r], all_max[i * R + r]);
  }

  // exp(x - m) on the local columns; the sums and the target logits, summed over ranks.
  Tensor probs = Tensor::empty({R, Vl});
  float* p = probs.data();
  std::vector<float> sums(2 * R, 0.0f);  // [sum of exps; target logit]
#pragma omp parallel for if (R > 16)
  for (int64_t r = 0; r < R; ++r) {
    float z = 0.0f;
#pragma omp simd reduction(+ : z)
    for (int64_t j = 0; j < Vl; ++j) z += (p[r * Vl + j] = ops::fast_exp(x[r * Vl + j] - m[r]));
    sums[r] = z;
    const int64_t col = targets[r] - first;
    if (targets[r] != ops::kIgnoreIndex && col >= 0 && col < Vl) sums[R + r] = x[r * Vl + col];
  }
  all_reduce(tensor, sums);
  double total = 0.0;
  for (int64_t r = 0; r < R; ++r) {
    const float inv = 1.0f / sums[r];
    for (int64_t j = 0; j < Vl; ++j) p[r * Vl + j] *= inv;
    if (targets[r] != ops::kIgnoreIndex) total += -(sums[R + r] - m[r] - std::log(sums[r]));
  }
  Tensor loss = Tensor::full({}, static_cast<float>(total / denom));
  std::vector<int32_t> kept(targets.begin(), targets.end());
  // backward: (softmax - onehot) / denominator on this rank's columns; no communication
  return record(loss, "vocab_parallel_cross_entropy(" + tensor.name() + ")", {logits},
                [probs, kept = std::move(kept), denom, R, Vl, first](const Tensor& gl) {
                  Tensor gx = Tensor::empty({R, Vl});
                  const float s = static_cast<float>(gl.item() / denom);
                  const float* pp = probs.data();
                  float* o = gx.data();
#pragma omp parallel for if (R > 16)
                  for (int64_t r = 0; r < R; ++r) {
                    const float rs = kept[r] == ops::kIgnoreIndex ? 0.0f : s;
#pragma omp simd
                    for (int64_t j = 0; j < Vl; ++j) o[r * Vl + j] = pp[r * Vl + j] * rs;
                    const int64_t col = kept[r] - first;
                    if (kept[r] != ops::kIgnoreIndex && col >= 0 && col < Vl) o[r * Vl + col] -= rs;
                  }
                  return std::vector<Tensor>{gx};
                });
}

Tensor vocab_parallel_linear_cross_entropy(const AxisGroup& tensor, const Tensor& x, const Tensor& weight,
                                           std::span<const int32_t> targets, int64_t first, int64_t vocab,
                                           double denominator, int64_t chunk_bytes) {
  ops::LinearCrossEntropyOptions options;
  options.chunk_bytes = chunk_bytes;
  options.shard = {.first = first, .vocab = vocab, .combine = [&tensor](std::span<float> stats) {
                     std::vector<float> gathered(stats.size() * tensor.size());
                     all_gather(tensor, stats, gathered);
                     ops::merge_row_statistics(gathered, tensor.size(), stats);
                   }};
  return ops::linear_cross_entropy(x, weight, targets, denominator, options);
}

Tensor gather_vocab(const AxisGroup& tensor, const Tensor& logits) {
  const int64_t Vl = logits.dim(-1), R = logits.numel() / Vl, t = tensor.size();
  if (t == 1) return logits;
  Tensor parts = Tensor::empty({t, R, Vl});
  all_gather(tensor, logits.span(), parts.span());
  Tensor y = Tensor::empty({R, Vl * t});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(y.data() + r * Vl * t + i * Vl, parts.data() + (i * R + r) * Vl, Vl * sizeof(float));
  const int64_t rank = tensor.rank();
  // forward: all_gather over the vocabulary; backward: this rank's columns
  return record(y, "gather_vocab(" + tensor.name() + ")", {logits}, [R, Vl, t, rank](const Tensor& gy) {
    Tensor gx = Tensor::empty({R, Vl});
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(gx.data() + r * Vl, gy.data() + r * Vl * t + rank * Vl, Vl * sizeof(float));
    return std::vector<Tensor>{gx};
  });
}

}  // namespace shardlab::parallel
