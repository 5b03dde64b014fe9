#include "parallel/train_step.h"

#include <optional>

#include "framework/error.h"
#include "framework/ops.h"
#include "optim/clip.h"

namespace shardlab::parallel {

StepResult train_step(nn::Transformer& model, const ParallelModel& parallel, optim::Optimizer& optimizer,
                      const data::Batch& rows, int microbatches, float lr, double max_norm, CommTrace* trace,
                      const std::function<void()>& gradients_ready,
                      const std::function<bool(const StepResult&)>& before_update) {
  StepResult result;
  const data::Batch batch = parallel.sequence_slice(rows);  // the context axis's positions of each row
  // Each microbatch's loss is scaled by 1/k before backward; the MoE layers' auxiliary
  // losses, which reach backward on their own, follow the same scale.
  model.moe_state->loss_scale = 1.0f / static_cast<float>(microbatches);
  model.moe_state->stats.clear();
  std::optional<PrecisionScope> precision;  // the forward and backward passes
  precision.emplace(parallel.precision().compute_precision());
  if (PipelineParallel* pipeline = parallel.pipeline()) {
    SL_ASSERT(pipeline->schedule().microbatches == microbatches,
              "the pipeline was built for " + std::to_string(pipeline->schedule().microbatches) +
                  " microbatches, the step has " + std::to_string(microbatches));
    // The schedule interleaves the microbatches' backward passes: nothing is reduced
    // until it has finished.
    const auto no_sync = parallel.no_sync();
    parallel.begin_microbatch();
    result.loss = pipeline->forward_backward(batch, trace);
  } else {
    const auto microbatch = [&](int i) {
      std::optional<ComputeSpan> span;
      if (trace) span.emplace(*trace, "forward+backward");
      parallel.begin_microbatch();
      const data::Batch micro = batch.microbatch(i, microbatches);
      Tensor loss = model.loss(micro.inputs, micro.targets, micro.rows, micro.seq_len);
      ops::scale(loss, 1.0f / static_cast<float>(microbatches)).backward();
      result.loss += loss.item() / microbatches;
    };
    {
      const auto no_sync = parallel.no_sync();  // the earlier microbatches accumulate locally
      for (int i = 0; i + 1 < microbatches; ++i) microbatch(i);
    }
    microbatch(microbatches - 1);  // its backward reduces the gradients as they are ready
  }
  precision.reset();  // the update and the gradient arithmetic stay fp32
  result.moe = model.moe_state->stats;
  parallel.finish_gradients();
  if (gradients_ready) gradients_ready();
  result.grad_norm = optim::clip_grad_norm(optimizer.views(), max_norm, parallel.norm_reduction());
  if (before_update) result.updated = before_update(result);
  if (result.updated) optimizer.step(lr);
  parallel.finish_step();
  parallel.zero_grad();
  return result;
}

}  // namespace shardlab::parallel
