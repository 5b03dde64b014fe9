#include "optim/adamw.h"

#include <cmath>

#include "framework/error.h"
#include "framework/ops/parallel_chunks.h"
#include "optim/kernels.h"

namespace shardlab::optim {

AdamWCoefficients adamw_coefficients(const AdamWOptions& options, float lr, int64_t step, bool decays) {
  SL_ASSERT(step >= 1, "AdamW step " + std::to_string(step) + " (steps count from 1)");
  const double t = static_cast<double>(step);
  return AdamWCoefficients{
      options.beta1,
      options.beta2,
      options.eps,
      static_cast<float>(decays ? 1.0 - static_cast<double>(lr) * options.weight_decay : 1.0),
      static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(options.beta1), t))),
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(options.beta2), t))),
  };
}

void adamw_update(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                  const AdamWCoefficients& c) {
  SL_ASSERT(grad.size() == param.size() && m.size() == param.size() && v.size() == param.size(),
            "adamw_update spans of " + std::to_string(param.size()) + " elements differ in size");
  float* p = param.data();
  const float* g = grad.data();
  float* pm = m.data();
  float* pv = v.data();
  const int64_t n = static_cast<int64_t>(param.size());
  ops::parallel_chunks(n, kParallelElements, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const float mi = c.beta1 * pm[i] + (1.0f - c.beta1) * g[i];
      const float vi = c.beta2 * pv[i] + (1.0f - c.beta2) * g[i] * g[i];
      pm[i] = mi;
      pv[i] = vi;
      p[i] = p[i] * c.decay_factor - c.step_size * mi / (std::sqrt(vi) * c.inv_bias_correction2_sqrt + c.eps);
    }
  });
}

AdamW::AdamW(ParamSource params, AdamWOptions options) : Optimizer(std::move(params)), options_(std::move(options)) {
  auto in_unit = [](float b) { return b >= 0.0f && b < 1.0f; };
  if (!in_unit(options_.beta1) || !in_unit(options_.beta2) || options_.eps <= 0.0f || options_.weight_decay < 0.0f) {
    throw UserError("AdamW betas (" + std::to_string(options_.beta1) + ", " + std::to_string(options_.beta2) +
                    "), eps " + std::to_string(options_.eps) + ", weight decay " +
                    std::to_string(options_.weight_decay) +
                    ": betas must lie in [0, 1), eps must be positive and weight decay not negative");
  }
  for (size_t i = 0; i < layout().size(); ++i) {
    m_.push_back(add_state("m", i));
    v_.push_back(add_state("v", i));
  }
}

void AdamW::update(size_t index, const ParamView& view, float lr) {
  adamw_update(view.value, view.grad, m_[index].span(), v_[index].span(),
               adamw_coefficients(options_, lr, step_count(), view.decay));
}

}  // namespace shardlab::optim
