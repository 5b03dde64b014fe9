#include "framework/nn/module.h"

#include <algorithm>

#include "framework/error.h"
#include "framework/memory.h"
#include "framework/rng.h"

namespace shardlab::nn {
namespace {

thread_local bool deferring = false;
thread_local bool loading_next = false;

}  // namespace

DeferParameters::DeferParameters() : outer_(deferring) { deferring = true; }
DeferParameters::~DeferParameters() { deferring = outer_; }
WeightsLoadedNext::WeightsLoadedNext() : outer_(loading_next) { loading_next = true; }
WeightsLoadedNext::~WeightsLoadedNext() { loading_next = outer_; }

Tensor& Module::add_parameter(Tensor& slot, const std::string& name, const Shape& shape, Init init, bool decay) {
  if (deferring) {
    slot = Tensor::unallocated(shape);
  } else {
    MemoryScope scope(MemoryCategory::Parameters);
    slot = Tensor::zeros(shape);
  }
  slot.set_requires_grad(true);
  own_.push_back({name, &slot, init, decay});
  return slot;
}

void Module::add_child_module(Module& child, const std::string& name) { children_.push_back({name, &child}); }

Module* Module::child(const std::string& name) const {
  for (const auto& [n, c] : children_) {
    if (n == name) return c;
  }
  return nullptr;
}

void Module::clear_forward_hooks() {
  pre_hooks_.clear();
  post_hooks_.clear();
}

Tensor Module::forward_hooked(const Tensor& x, const std::function<Tensor(const Tensor&)>& forward) const {
  if (pre_hooks_.empty()) return post_hooked(forward(x));
  Tensor h = x;
  for (const Hook& hook : pre_hooks_) h = hook(h);
  return post_hooked(forward(h));
}

Tensor Module::use(const std::string& name, const Tensor& parameter) const {
  return parameter_hook && parameter.defined() ? parameter_hook(name, parameter) : parameter;
}

Tensor Module::post_hooked(Tensor y) const {
  for (const Hook& hook : post_hooks_) y = hook(y);
  return y;
}

void Module::collect(const std::string& prefix, std::vector<Parameter>& out) {
  for (const Parameter& p : own_) {
    if (p.tensor->defined()) out.push_back({prefix + p.name, p.tensor, p.init, p.decay});
  }
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

void Module::zero_grad() {
  for (const Parameter& p : parameters()) p.tensor->zero_grad();
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (const Parameter& p : parameters()) n += p.tensor->numel();
  return n;
}

void initialize_range(const Parameter& p, uint64_t seed, int64_t begin, int64_t end, float* out) {
  SL_ASSERT(0 <= begin && begin <= end && end <= p.tensor->numel(), "initialize_range out of " + p.name);
  if (loading_next) return std::fill(out, out + (end - begin), 0.0f);
  switch (p.init.kind) {
    case Init::Normal: {
      const Rng rng(seed);
      const uint64_t stream = hash_name(p.name);
      // Each value is a function of (name, index) alone: threads split the range freely.
#pragma omp parallel for schedule(static) if (end - begin >= (1 << 16))
      for (int64_t i = begin; i < end; ++i) out[i - begin] = p.init.std * rng.normal(stream, i);
      break;
    }
    case Init::Zeros: std::fill(out, out + (end - begin), 0.0f); break;
    case Init::Ones: std::fill(out, out + (end - begin), 1.0f); break;
  }
}

namespace {

// Gives p its own storage (counted as parameters); false if it had some already.
bool allocate(const Parameter& p) {
  if (p.tensor->has_storage()) return false;
  MemoryScope scope(MemoryCategory::Parameters);
  p.tensor->share_storage(std::make_shared<Storage>(p.tensor->numel()), 0);
  return true;
}

}  // namespace

void initialize_unallocated(Module& model, uint64_t seed) {
  for (const Parameter& p : model.parameters()) {
    if (allocate(p)) initialize_range(p, seed, 0, p.tensor->numel(), p.tensor->data());
  }
}

void initialize(Module& model, uint64_t seed) {
  for (const Parameter& p : model.parameters()) {
    allocate(p);
    initialize_range(p, seed, 0, p.tensor->numel(), p.tensor->data());
  }
}

}  // namespace shardlab::nn
