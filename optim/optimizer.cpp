#include "optim/optimizer.h"

#include <set>

#include "framework/error.h"
#include "framework/memory.h"

namespace shardlab::optim {

Optimizer::Optimizer(NamedTensors params) : params_(std::move(params)) {
  std::set<std::string> names;
  for (const auto& [name, param] : params_) {
    SL_ASSERT(param.defined() && param.requires_grad() && !param.grad_fn(), "parameter " + name + " is not a leaf "
                                                                            "that requires grad");
    SL_ASSERT(names.insert(name).second, "parameter name " + name + " appears twice");
  }
}

void Optimizer::step(float lr) {
  ++step_count_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = params_[i].second.grad();
    if (!grad.defined()) continue;
    SL_ASSERT(grad.numel() == params_[i].second.numel(), "gradient of " + params_[i].first + " has shape " +
                                                             shape_str(grad.shape()));
    update(i, lr);
  }
}

void Optimizer::zero_grad() {
  for (auto& [name, param] : params_) param.zero_grad();
}

void Optimizer::set_step_count(int64_t steps) {
  if (steps < 0) throw UserError("optimizer step count " + std::to_string(steps) + " is negative; the checkpoint is corrupt");
  step_count_ = steps;
}

Tensor Optimizer::add_state(const std::string& kind, size_t index) {
  MemoryScope scope(MemoryCategory::Optimizer);
  Tensor state = Tensor::zeros(params_[index].second.shape());
  state_.emplace_back(kind + "/" + params_[index].first, state);
  return state;
}

}  // namespace shardlab::optim
