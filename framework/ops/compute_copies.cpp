#include "framework/ops/compute_copies.h"

#include "framework/error.h"
#include "framework/memory.h"

namespace shardlab {
namespace {

// This thread's live scopes, oldest first. Thread-local as the compute precision is: a
// matmul on another thread neither sees this thread's precision nor its copies.
thread_local std::vector<const ComputeCopies*> t_scopes;

}  // namespace

ComputeCopies::ComputeCopies(const std::vector<Tensor>& weights, const ComputePrecision& precision)
    : precision_(precision) {
  if (precision.bf16()) {
    const MemoryScope memory(MemoryCategory::Parameters);  // the compute copy of the weights
    for (const Tensor& w : weights) {
      SL_ASSERT(w.has_storage(), "a compute copy needs the weight's values: " + shape_str(w.shape()) + " has no storage");
      if (copies_.contains(w.impl())) continue;
      // The uncached conversion itself (an outer scope's copy, if one is live), so that a
      // served operand is bitwise what the op would have made.
      copies_.emplace(w.impl(), Copy{.data = w.data(), .numel = w.numel(), .storage = w.impl()->storage,
                                     .operand = MatmulOperand(w, precision)});
      bytes_ += w.numel() * (precision.matmul == Bf16Matmul::kNative ? 2 : 4);
    }
  }
  t_scopes.push_back(this);
}

ComputeCopies::~ComputeCopies() {
  SL_ASSERT(!t_scopes.empty() && t_scopes.back() == this, "ComputeCopies scopes must end in reverse order of creation");
  t_scopes.pop_back();
}

const MatmulOperand* ComputeCopies::find(const Tensor& x, const ComputePrecision& precision) {
  if (!precision.bf16()) return nullptr;
  for (auto scope = t_scopes.rbegin(); scope != t_scopes.rend(); ++scope) {
    const ComputeCopies& s = **scope;
    if (s.precision_.compute != precision.compute || s.precision_.matmul != precision.matmul) continue;
    const auto it = s.copies_.find(x.impl());
    // The same tensor with its storage replaced since: its values may differ.
    if (it == s.copies_.end() || it->second.data != x.data() || it->second.numel != x.numel()) continue;
    ++s.served_;
    return &it->second.operand;
  }
  return nullptr;
}

}  // namespace shardlab
