// SGD with (heavy-ball) momentum, as torch.optim.SGD without dampening or nesterov.
//
// Per element with learning rate lr:
//   b  = momentum * b + g        (b starts at zero, so the first step has b = g)
//   p -= lr * b                  (p -= lr * g when momentum is 0: no state)
// State: "momentum" for each view (optimizer.h) when momentum > 0.
//
//   optim::SGD opt(optim::module_parameters(model), {.momentum = 0.9f});
//   opt.step(0.1f);
#pragma once

#include <span>

#include "optim/optimizer.h"

namespace shardlab::optim {

struct SGDOptions {
  float momentum = 0.0f;
};

// One SGD update of a flat span (a whole parameter or a slice); `buffer` is empty when
// momentum is 0.
void sgd_update(std::span<float> param, std::span<const float> grad, std::span<float> buffer, float lr,
                float momentum);

class SGD : public Optimizer {
 public:
  // Throws UserError on momentum outside [0, 1).
  explicit SGD(ParamSource params, SGDOptions options = {});

 private:
  void update(size_t index, const ParamView& view, float lr) override;

  SGDOptions options_;
  std::vector<Tensor> buffers_;  // empty when momentum is 0
};

}  // namespace shardlab::optim
