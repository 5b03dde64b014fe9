// Optimizer: the base of SGD and AdamW (optim/sgd.h, optim/adamw.h).
//
// An optimizer updates parameter views: stretches of parameter elements this process
// owns, each with its gradient. One process owns whole tensors; a parallel strategy
// hands out what its rank updates -- a ZeRO slice of a gradient bucket, an FSDP shard --
// so the same optimizer, built outside the strategy, steps every layout (docs/data_parallel.md). The
// views come from a ParamSource, asked again at every step (gradient memory comes and
// goes between steps); their number and sizes never change.
//
// The optimizer owns its state, one flat tensor per view and kind (AdamW's "m" and "v"),
// allocated zero at construction and counted under MemoryCategory::Optimizer. state()
// names each by kind and view, so checkpoint I/O can place it in the parameter it
// belongs to; writing into it (then set_step_count) restores the optimizer.
//
// The update itself is a free function over flat spans in each optimizer's header,
// element-wise, so updating a slice equals the same elements of the full update bit for bit.
//
//   optim::AdamW opt(optim::module_parameters(model), {.weight_decay = 0.1f});
//   loss.backward();
//   optim::clip_grad_norm(opt.views(), 1.0);
//   opt.step(schedule.lr(step));
//   model.zero_grad();
//
// Gradient accumulation over k microbatches: see optim/clip.h (accumulate_gradients).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "framework/nn/module.h"
#include "framework/tensor.h"

namespace shardlab::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Elements [offset, offset + value.size()) of parameter `name` (of the tensor this process
// holds of it, under model parallelism its shard), which this process updates.
struct ParamView {
  std::string name;
  int64_t offset = 0;
  std::span<float> value;
  std::span<float> grad;  // same size; empty when the parameter has no gradient this step
  bool decay = true;      // takes weight decay
  bool counted = true;    // this process counts it in the global gradient norm (another
                          // process holding the same elements does not; optim/clip.h)
};
using ParamViews = std::vector<ParamView>;
using ParamSource = std::function<ParamViews()>;

// True for the parameters that get weight decay.
using DecayPredicate = std::function<bool(const std::string& name, const Tensor& param)>;
// The GPT-2 convention: decay matrices (ndim >= 2), not biases or norm gains.
bool decay_matrices(const std::string& name, const Tensor& param);

// Whole tensors and their current .grad(): one process's parameters.
ParamSource tensor_parameters(NamedTensors params, DecayPredicate decays = decay_matrices);
// A module's parameters, whole, decaying as each parameter says (nn::Parameter::decay).
ParamSource module_parameters(nn::Module& module);

class Optimizer {
 public:
  // One state tensor: kind "m", "v" or "momentum" of view `view`.
  struct State {
    std::string kind;
    size_t view;
    Tensor tensor;  // flat, the view's size
  };

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Counts one step, then updates every view that has a gradient with rate `lr`.
  void step(float lr);
  // The views now, with their gradients (for clipping: optim::clip_grad_norm(opt.views(), ...)).
  ParamViews views() const { return source_(); }

  const std::vector<State>& state() const { return state_; }
  // The kinds of state it keeps, in order: {"m", "v"}, {"momentum"} or none.
  std::vector<std::string> state_kinds() const;
  // "<kind>/<param name>" of state(i), e.g. "m/blocks.0.attn.wq.weight".
  std::string state_name(size_t i) const { return state_[i].kind + "/" + layout_[state_[i].view].name; }
  // The views as they were at construction: names, offsets, sizes (their spans may be stale).
  const ParamViews& layout() const { return layout_; }
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps);

 protected:
  explicit Optimizer(ParamSource source);
  // A zero state tensor the size of view `index`.
  Tensor add_state(const std::string& kind, size_t index);
  // Updates views[index] (whose gradient is non-empty) once; step_count() is already this step's.
  virtual void update(size_t index, const ParamView& view, float lr) = 0;

 private:
  ParamSource source_;
  ParamViews layout_;
  std::vector<State> state_;
  int64_t step_count_ = 0;
};

}  // namespace shardlab::optim
