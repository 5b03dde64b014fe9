// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW.
//
// Per element, at step t (1-based) with learning rate lr:
//   p -= lr * wd * p                      (only for parameters that decay)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State: "m" and "v" for each view (optimizer.h). Which parameters decay is the views'
// business (ParamView::decay).
//
//   optim::AdamW opt(optim::module_parameters(model), {.weight_decay = 0.1f});
//   opt.step(3e-4f);
//
// The kernel alone, for any slice:
//   auto c = optim::adamw_coefficients(options, lr, opt_step, decays);
//   optim::adamw_update(param_slice, grad_slice, m_slice, v_slice, c);
#pragma once

#include <span>

#include "optim/optimizer.h"

namespace shardlab::optim {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// The per-step scalars of one update, computed in double once per tensor.
struct AdamWCoefficients {
  float beta1, beta2, eps;
  float decay_factor;   // 1 - lr * wd, or 1 where the parameter does not decay
  float step_size;      // lr / (1 - beta1^t)
  float inv_bias_correction2_sqrt;  // 1 / sqrt(1 - beta2^t)
};

AdamWCoefficients adamw_coefficients(const AdamWOptions& options, float lr, int64_t step, bool decays);

// One AdamW update of a flat span: a whole parameter or any slice of one (spans of equal size).
void adamw_update(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                  const AdamWCoefficients& c);

class AdamW : public Optimizer {
 public:
  // Throws UserError on betas outside [0, 1), eps <= 0 or negative weight decay.
  explicit AdamW(ParamSource params, AdamWOptions options = {});
  const AdamWOptions& options() const { return options_; }

 private:
  void update(size_t index, const ParamView& view, float lr) override;

  AdamWOptions options_;
  std::vector<Tensor> m_, v_;
};

}  // namespace shardlab::optim
