#include "optim/sgd.h"

#include "framework/error.h"
#include "framework/ops/parallel_chunks.h"
#include "optim/kernels.h"

namespace shardlab::optim {

void sgd_update(std::span<float> param, std::span<const float> grad, std::span<float> buffer, float lr,
                float momentum) {
  SL_ASSERT(grad.size() == param.size() && (buffer.empty() || buffer.size() == param.size()),
            "sgd_update spans of " + std::to_string(param.size()) + " elements differ in size");
  float* p = param.data();
  const float* g = grad.data();
  const int64_t n = static_cast<int64_t>(param.size());
  if (buffer.empty()) {
    ops::parallel_chunks(n, kParallelElements, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) p[i] -= lr * g[i];
    });
    return;
  }
  float* b = buffer.data();
  ops::parallel_chunks(n, kParallelElements, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      b[i] = momentum * b[i] + g[i];
      p[i] -= lr * b[i];
    }
  });
}

SGD::SGD(ParamSource params, SGDOptions options) : Optimizer(std::move(params)), options_(options) {
  if (!(options_.momentum >= 0.0f && options_.momentum < 1.0f)) {
    throw UserError("SGD momentum " + std::to_string(options_.momentum) + " must lie in [0, 1)");
  }
  if (options_.momentum > 0.0f) {
    for (size_t i = 0; i < layout().size(); ++i) buffers_.push_back(add_state("momentum", i));
  }
}

void SGD::update(size_t index, const ParamView& view, float lr) {
  std::span<float> buffer = buffers_.empty() ? std::span<float>{} : buffers_[index].span();
  sgd_update(view.value, view.grad, buffer, lr, options_.momentum);
}

}  // namespace shardlab::optim
