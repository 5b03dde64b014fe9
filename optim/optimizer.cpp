#include "optim/optimizer.h"

#include <algorithm>

#include "framework/error.h"
#include "framework/memory.h"

namespace shardlab::optim {
namespace {

ParamView whole(const std::string& name, const Tensor& param, bool decay) {
  Tensor p = param;
  Tensor g = p.grad();
  return {.name = name, .value = p.span(), .grad = g.defined() ? g.span() : std::span<float>{}, .decay = decay};
}

}  // namespace

bool decay_matrices(const std::string&, const Tensor& param) { return param.ndim() >= 2; }

ParamSource tensor_parameters(NamedTensors params, DecayPredicate decays) {
  return [params = std::move(params), decays = std::move(decays)] {
    ParamViews views;
    for (const auto& [name, p] : params) views.push_back(whole(name, p, decays && decays(name, p)));
    return views;
  };
}

ParamSource module_parameters(nn::Module& module) {
  return [&module] {
    ParamViews views;
    for (const nn::Parameter& p : module.parameters()) views.push_back(whole(p.name, *p.tensor, p.decay));
    return views;
  };
}

Optimizer::Optimizer(ParamSource source) : source_(std::move(source)), layout_(source_()) {}

void Optimizer::step(float lr) {
  const ParamViews views = source_();
  SL_ASSERT(views.size() == layout_.size(), "the optimizer was built over " + std::to_string(layout_.size()) +
                                                " parameter views, its source now gives " + std::to_string(views.size()));
  ++step_count_;
  for (size_t i = 0; i < views.size(); ++i) {
    const ParamView& v = views[i];
    SL_ASSERT(v.name == layout_[i].name && v.value.size() == layout_[i].value.size(),
              "parameter view " + std::to_string(i) + " (" + v.name + ") changed since the optimizer was built");
    if (v.grad.empty()) continue;
    SL_ASSERT(v.grad.size() == v.value.size(), "gradient of " + v.name + " has " + std::to_string(v.grad.size()) +
                                                   " elements, the parameter view " + std::to_string(v.value.size()));
    update(i, v, lr);
  }
}

std::vector<std::string> Optimizer::state_kinds() const {
  std::vector<std::string> kinds;
  for (const State& s : state_) {
    if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) kinds.push_back(s.kind);
  }
  return kinds;
}

void Optimizer::set_step_count(int64_t steps) {
  if (steps < 0) throw UserError("optimizer step count " + std::to_string(steps) + " is negative; the checkpoint is corrupt");
  step_count_ = steps;
}

Tensor Optimizer::add_state(const std::string& kind, size_t index) {
  MemoryScope scope(MemoryCategory::Optimizer);
  Tensor state = Tensor::zeros({static_cast<int64_t>(layout_[index].value.size())});
  state_.push_back({kind, index, state});
  return state;
}

}  // namespace shardlab::optim
