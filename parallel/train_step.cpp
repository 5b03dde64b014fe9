#include "parallel/train_step.h"

#include <optional>

#include "framework/error.h"
#include "framework/ops.h"
#include "optim/clip.h"

namespace shardlab::parallel {

StepResult train_step(nn::Transformer& model, const ParallelModel& parallel, optim::Optimizer& optimizer,
                      const data::Batch& batch, int microbatches, float lr, double max_norm, CommTrace* trace,
                      const std::function<void()>& gradients_ready) {
  StepResult result;
  DataParallel& strategy = *parallel;
  // Each microbatch's loss is scaled by 1/k before backward; the MoE layers' auxiliary
  // losses, which reach backward on their own, follow the same scale.
  model.moe_state->loss_scale = 1.0f / static_cast<float>(microbatches);
  model.moe_state->stats.clear();
  if (parallel.pipeline) {
    SL_ASSERT(parallel.pipeline->schedule().microbatches == microbatches,
              "the pipeline was built for " + std::to_string(parallel.pipeline->schedule().microbatches) +
                  " microbatches, the step has " + std::to_string(microbatches));
    // The schedule interleaves the microbatches' backward passes: nothing is reduced
    // until it has finished (a no-sync scope over the whole schedule).
    strategy.begin_microbatch(0, 2);
    result.loss = parallel.pipeline->forward_backward(batch, trace);
  } else {
    for (int i = 0; i < microbatches; ++i) {
      std::optional<ComputeSpan> span;
      if (trace) span.emplace(*trace, "forward+backward");
      strategy.begin_microbatch(i, microbatches);  // gradients sync only in the last backward
      const data::Batch micro = batch.microbatch(i, microbatches);
      Tensor loss = model.loss(micro.inputs, micro.targets, micro.rows, micro.seq_len);
      ops::scale(loss, 1.0f / static_cast<float>(microbatches)).backward();
      result.loss += loss.item() / microbatches;
    }
  }
  result.moe = model.moe_state->stats;
  strategy.finish_gradients();
  if (gradients_ready) gradients_ready();
  result.grad_norm = optim::clip_grad_norm(optimizer.views(), max_norm, strategy.norm_reduction());
  optimizer.step(lr);
  strategy.finish_step();
  strategy.zero_grad();
  return result;
}

}  // namespace shardlab::parallel
