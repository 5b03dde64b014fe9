#include "framework/ops/loss.h"

#include <cmath>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/fast_math.h"

namespace shardlab::ops {

Tensor cross_entropy(const Tensor& logits, std::span<const int32_t> targets, double denominator) {
  const int64_t V = logits.dim(-1), R = logits.numel() / V;
  SL_ASSERT(static_cast<int64_t>(targets.size()) == R,
            "cross_entropy: " + std::to_string(targets.size()) + " targets for logits " + shape_str(logits.shape()));
  int64_t valid = 0;
  for (int32_t t : targets) {
    SL_ASSERT(t == kIgnoreIndex || (t >= 0 && t < V), "target " + std::to_string(t) + " outside vocab " + std::to_string(V));
    valid += t != kIgnoreIndex;
  }
  const double denom = denominator > 0.0 ? denominator : std::max<int64_t>(valid, 1);
  // Row-wise probabilities are kept for backward: softmax(logits) - onehot is the gradient.
  Tensor probs = Tensor::empty({R, V});
  std::vector<double> row_loss(R, 0.0);
  const float* px = logits.data();
  float* pp = probs.data();
#pragma omp parallel for if (R > 16)
  for (int64_t r = 0; r < R; ++r) {
    const float* in = px + r * V;
    const SoftmaxStats st = softmax_row(in, pp + r * V, V);
    if (targets[r] != kIgnoreIndex) row_loss[r] = -(in[targets[r]] - st.max - std::log(st.sum));
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  Tensor loss = Tensor::full({}, static_cast<float>(total / denom));
  std::vector<int32_t> kept(targets.begin(), targets.end());
  return record(loss, "cross_entropy", {logits}, [probs, kept = std::move(kept), denom, R, V](const Tensor& gl) {
    Tensor gx = Tensor::empty({R, V});
    const float s = static_cast<float>(gl.item() / denom);
    const float* p = probs.data();
    float* o = gx.data();
#pragma omp parallel for if (R > 16)
    for (int64_t r = 0; r < R; ++r) {
      const float rs = kept[r] == kIgnoreIndex ? 0.0f : s;
#pragma omp simd
      for (int64_t j = 0; j < V; ++j) o[r * V + j] = p[r * V + j] * rs;
      if (kept[r] != kIgnoreIndex) o[r * V + kept[r]] -= rs;
    }
    return std::vector<Tensor>{gx};
  });
}

}  // namespace shardlab::ops
