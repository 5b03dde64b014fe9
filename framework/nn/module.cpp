#include "framework/nn/module.h"

#include "framework/memory.h"
#include "framework/rng.h"

namespace shardlab::nn {

Tensor& Module::add_parameter(Tensor& slot, const std::string& name, const Shape& shape, Init init, bool decay) {
  {
    MemoryScope scope(MemoryCategory::Parameters);
    slot = Tensor::zeros(shape);
  }
  slot.set_requires_grad(true);
  own_.push_back({name, &slot, init, decay});
  return slot;
}

void Module::add_child_module(Module& child, const std::string& name) { children_.push_back({name, &child}); }

void Module::collect(const std::string& prefix, std::vector<Parameter>& out) {
  for (const Parameter& p : own_) out.push_back({prefix + p.name, p.tensor, p.init, p.decay});
  for (auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<Parameter> Module::parameters() {
  std::vector<Parameter> out;
  collect("", out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Parameter& p : parameters()) out.emplace_back(p.name, *p.tensor);
  return out;
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (const Parameter& p : parameters()) n += p.tensor->numel();
  return n;
}

void initialize(Module& model, uint64_t seed) {
  const Rng rng(seed);
  for (const Parameter& p : model.parameters()) {
    float* data = p.tensor->data();
    const int64_t n = p.tensor->numel();
    const uint64_t stream = hash_name(p.name);
    for (int64_t i = 0; i < n; ++i) {
      switch (p.init.kind) {
        case Init::Normal: data[i] = p.init.std * rng.normal(stream, i); break;
        case Init::Zeros: data[i] = 0.0f; break;
        case Init::Ones: data[i] = 1.0f; break;
      }
    }
  }
}

}  // namespace shardlab::nn
