// Optimizer: the base of SGD and AdamW (optim/sgd.h, optim/adamw.h).
//
// An optimizer updates a list of named leaf parameters from the gradients in their
// .grad() (parameters without a gradient are skipped). It owns its state tensors --
// allocated at construction, zero, counted under MemoryCategory::Optimizer -- and
// exposes them by name for checkpoints: state_tensors() returns the live tensors, so
// reading a checkpoint into their spans (then set_step_count) restores the optimizer.
//
// The update itself is a free function over flat spans (param, grad, state) in each
// optimizer's header; step() calls it on whole tensors, and a ZeRO stage calls it on
// the slice a rank owns -- element-wise, so a slice update equals the same elements of
// the full update bit for bit.
//
// Gradient accumulation over k microbatches: see optim/clip.h (accumulate_gradients).
//
//   optim::AdamW opt(model.named_parameters(), {.weight_decay = 0.1f});
//   loss.backward();
//   optim::clip_grad_norm(opt.params(), 1.0);
//   opt.step(schedule.lr(step));
//   opt.zero_grad();
//   for (auto& [name, t] : opt.state_tensors()) writer.write("optim/" + name, t.shape(), t.span());
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace shardlab::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Counts one step, then updates every parameter that has a gradient with rate `lr`.
  void step(float lr);
  void zero_grad();  // drops every parameter's gradient

  const NamedTensors& params() const { return params_; }
  // Live state, named "<kind>/<param name>", e.g. "m/blocks.0.attn.wq".
  const NamedTensors& state_tensors() const { return state_; }
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps);

 protected:
  // Params must be distinct leaf tensors that require grad, with unique names.
  explicit Optimizer(NamedTensors params);
  // A zero tensor shaped like params()[index], registered as "<kind>/<name>".
  Tensor add_state(const std::string& kind, size_t index);
  // Updates params()[index] (whose gradient is defined) once; step_count() is already this step's.
  virtual void update(size_t index, float lr) = 0;

 private:
  NamedTensors params_;
  NamedTensors state_;
  int64_t step_count_ = 0;
};

}  // namespace shardlab::optim
