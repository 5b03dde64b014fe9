#include "optim/schedule.h"

#include <cmath>
#include <numbers>
#include <string>

#include "framework/error.h"

namespace shardlab::optim {

WarmupCosine::WarmupCosine(double max_lr, double min_lr, int64_t warmup_steps, int64_t total_steps)
    : max_lr_(max_lr), min_lr_(min_lr), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  if (!(0.0 <= min_lr && min_lr <= max_lr)) {
    throw UserError("learning rate " + std::to_string(max_lr) + " with floor " + std::to_string(min_lr) +
                    ": need 0 <= minimum <= maximum learning rate");
  }
  if (total_steps < 1 || warmup_steps < 0 || warmup_steps > total_steps) {
    throw UserError("warmup of " + std::to_string(warmup_steps) + " steps in a run of " + std::to_string(total_steps) +
                    " steps: need at least one step and 0 <= warmup <= total steps");
  }
}

float WarmupCosine::lr(int64_t step) const {
  if (step < warmup_steps_) return static_cast<float>(max_lr_ * static_cast<double>(step + 1) / warmup_steps_);
  if (step >= total_steps_) return static_cast<float>(min_lr_);
  const double progress = static_cast<double>(step - warmup_steps_) / static_cast<double>(total_steps_ - warmup_steps_);
  return static_cast<float>(min_lr_ + (max_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace shardlab::optim
