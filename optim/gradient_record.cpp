#include "optim/gradient_record.h"

#include <algorithm>

namespace shardlab::optim {

GradientRecord::GradientRecord(ParamSource params) : Optimizer(std::move(params)) {
  for (size_t i = 0; i < layout().size(); ++i) grads_.push_back(add_state("grad", i));
}

void GradientRecord::update(size_t index, const ParamView& view, float /*lr*/) {
  std::copy(view.grad.begin(), view.grad.end(), grads_[index].data());
}

}  // namespace shardlab::optim
