#include "parallel/data_parallel/error_feedback.h"


#include "framework/error.h"
#include "framework/memory.h"
#include "parallel/comm/collectives.h"

namespace shardlab::parallel {

std::span<float> ErrorFeedback::residual(const void* owner, int64_t part, const AxisGroup& group, CollectiveOp op,
                                         int64_t elements) {
  if (wire_ != DType::kInt8 || group.size() == 1) return {};
  const int64_t floats = error_feedback_floats(group, op, elements);
  Tensor& r = residuals_[{owner, part}];
  if (!r.defined()) {
    MemoryScope scope(MemoryCategory::Gradients);
    r = Tensor::zeros({floats});
  }
  SL_ASSERT(r.numel() == floats, "a reduction changed size between steps");
  return r.span();
}

int64_t ErrorFeedback::bytes() const {
  int64_t total = 0;
  for (const auto& [key, r] : residuals_) total += r.numel() * static_cast<int64_t>(sizeof(float));
  return total;
}

}  // namespace shardlab::parallel
