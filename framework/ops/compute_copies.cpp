#include "framework/ops/compute_copies.h"

#include "framework/error.h"
#include "framework/memory.h"

namespace shardlab {
namespace {

// This thread's live scopes, oldest first. Thread-local as the compute precision is: a
// matmul on another thread neither sees this thread's precision nor its copies.
thread_local std::vector<const ComputeCopies*> t_scopes;

}  // namespace

ComputeCopies::ComputeCopies(const std::vector<Tensor>& weights, const ComputePrecision& precision, Options options)
    : precision_(precision) {
  const MemoryScope memory(MemoryCategory::Parameters);  // the compute copies of the weights
  for (const Tensor& w : weights) {
    SL_ASSERT(w.has_storage(), "a compute copy needs the weight's values: " + shape_str(w.shape()) + " has no storage");
    if (copies_.contains(w.impl()) || !(precision.bf16() || options.decode_panels)) continue;
    Copy copy{.data = w.data(), .numel = w.numel(), .storage = w.impl()->storage, .operand = {}, .panels = nullptr};
    if (precision.bf16()) {
      // The uncached conversion itself (an outer scope's copy, if one is live), so that a
      // served operand is bitwise what the op would have made.
      copy.operand = MatmulOperand(w, precision);
      bytes_ += w.numel() * (precision.matmul == Bf16Matmul::kNative ? 2 : 4);
    }
    if (options.decode_panels && w.ndim() == 2) {
      copy.panels = std::make_shared<const MatvecPanels>(w.data(), w.dim(0), w.dim(1), precision.bf16());
      bytes_ += copy.panels->bytes();
    }
    copies_.emplace(w.impl(), std::move(copy));
  }
  t_scopes.push_back(this);
}

ComputeCopies::~ComputeCopies() {
  SL_ASSERT(!t_scopes.empty() && t_scopes.back() == this, "ComputeCopies scopes must end in reverse order of creation");
  t_scopes.pop_back();
}

const ComputeCopies::Copy* ComputeCopies::lookup(const Tensor& x, const ComputePrecision& precision, Form form) {
  for (auto scope = t_scopes.rbegin(); scope != t_scopes.rend(); ++scope) {
    const ComputeCopies& s = **scope;
    if (s.precision_.compute != precision.compute || s.precision_.matmul != precision.matmul) continue;
    const auto it = s.copies_.find(x.impl());
    // The same tensor with its storage replaced since: its values may differ.
    if (it == s.copies_.end() || it->second.data != x.data() || it->second.numel != x.numel()) continue;
    if (form == Form::kPanels && it->second.panels == nullptr) continue;
    ++s.served_;
    return &it->second;
  }
  return nullptr;
}

const MatmulOperand* ComputeCopies::find(const Tensor& x, const ComputePrecision& precision) {
  if (!precision.bf16()) return nullptr;
  const Copy* copy = lookup(x, precision, Form::kOperand);
  return copy ? &copy->operand : nullptr;
}

const MatvecPanels* ComputeCopies::find_panels(const Tensor& w, const ComputePrecision& precision) {
  if (t_scopes.empty()) return nullptr;
  const Copy* copy = lookup(w, precision, Form::kPanels);
  return copy ? copy->panels.get() : nullptr;
}

}  // namespace shardlab
