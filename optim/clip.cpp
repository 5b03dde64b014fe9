#include "optim/clip.h"

#include <cmath>

#include "framework/error.h"
#include "framework/ops/parallel_chunks.h"
#include "optim/kernels.h"

namespace shardlab::optim {

double clip_grad_norm(const ParamViews& params, double max_norm, const SquaredNormReduce& reduce) {
  double local = 0.0;
  for (const ParamView& p : params) {
    if (!p.counted) continue;
    const float* g = p.grad.data();
    const int64_t n = static_cast<int64_t>(p.grad.size());
    double sum = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : sum) if (n > kParallelElements)
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
    local += sum;
  }
  const double norm = std::sqrt(reduce ? reduce(local) : local);
  if (max_norm <= 0.0 || norm <= max_norm) return norm;
  const float scale = static_cast<float>(max_norm / (norm + 1e-6));
  for (const ParamView& p : params) {
    float* g = p.grad.data();
    const int64_t n = static_cast<int64_t>(p.grad.size());
    ops::parallel_chunks(n, kParallelElements, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) g[i] *= scale;
    });
  }
  return norm;
}

double accumulate_gradients(int k, const std::function<double(int index, float loss_scale)>& microbatch) {
  if (k < 1) {
    throw UserError("gradient accumulation over " + std::to_string(k) + " microbatches: use at least 1");
  }
  double total = 0.0;
  for (int i = 0; i < k; ++i) total += microbatch(i, 1.0f / static_cast<float>(k));
  return total / k;
}

}  // namespace shardlab::optim
