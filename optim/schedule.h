// Learning-rate schedule: linear warmup, then cosine decay to a floor (as llm.c, nanoGPT).
//
//   step <  warmup:           max_lr * (step + 1) / warmup
//   warmup <= step < total:   min_lr + (max_lr - min_lr) * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2
//   step >= total:            min_lr
// Steps count from 0; lr(warmup) is the peak max_lr.
//
//   optim::WarmupCosine schedule(3e-4, 3e-5, /*warmup=*/100, /*total=*/2000);
//   opt.step(schedule.lr(step));
#pragma once

#include <cstdint>

namespace shardlab::optim {

class WarmupCosine {
 public:
  // Throws UserError unless 0 <= min_lr <= max_lr, 0 <= warmup_steps <= total_steps and total_steps >= 1.
  WarmupCosine(double max_lr, double min_lr, int64_t warmup_steps, int64_t total_steps);
  float lr(int64_t step) const;

 private:
  double max_lr_, min_lr_;
  int64_t warmup_steps_, total_steps_;
};

}  // namespace shardlab::optim
