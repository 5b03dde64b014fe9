// GradientRecord: an "optimizer" that changes no parameter but copies each view's gradient
// into its state, kind "grad". Stepped once the gradients are final (reduced, before
// clipping), it holds them in the optimizer-state layout every parallel strategy already
// saves unsharded, so a checkpoint written with it stores the step's gradients as
// optim/grad/<param name> beside params/<param name> (train_gpt --dump-grads).
//
//   optim::GradientRecord record(strategy->parameters());
//   strategy->finish_gradients();
//   record.step(0.0f);   // copies; the parameters stay as they are
#pragma once

#include "optim/optimizer.h"

namespace shardlab::optim {

class GradientRecord : public Optimizer {
 public:
  explicit GradientRecord(ParamSource params);

 private:
  void update(size_t index, const ParamView& view, float lr) override;

  std::vector<Tensor> grads_;
};

}  // namespace shardlab::optim
