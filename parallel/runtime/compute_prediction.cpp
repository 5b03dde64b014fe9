#include "parallel/runtime/compute_prediction.h"

#include <algorithm>
#include <cmath>

#include "parallel/comm/comm_context.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/training/train_step.h"
#include "parallel/data_parallel/gradient_sync.h"

namespace shardlab::runtime {
namespace {

// The optimizer's pass over this rank's parameters at the calibrated memory bandwidth:
// AdamW reads weight, gradient and two moments and writes three; zeroing and the gradient
// norm add two more: 9 floats per parameter.
double optimizer_seconds(const RunConfig& run, const cost::TrainConfig& tc, const cost::Layout& l,
                         const cost::HardwareProfile& hw, int zero_shards) {
  if (hw.hbm_bandwidth <= 0) return 0.0;
  const double optimizer_shards = run.zero >= 1 ? zero_shards : 1;
  const double params = cost::count_params(tc.model).total / (l.tensor * l.pipe * optimizer_shards);
  return sizeof(float) * 9.0 * params / hw.hbm_bandwidth;
}

// What a FLOP count misses, at the calibrated memory bandwidth: the element-wise work of
// forward and backward (norms, residuals, softmax, the MLP activation, the loss over the
// vocabulary) on this rank's tokens and layers.
double elementwise_seconds(const RunConfig& run, const cost::TrainConfig& tc, const cost::Layout& l,
                           const cost::HardwareProfile& hw) {
  if (hw.hbm_bandwidth <= 0) return 0.0;
  const cost::ElementwiseTraffic t = cost::elementwise_elements_per_token_layer(tc.model, run.sequence_length());
  const double tokens = tc.batch_tokens / (l.data * l.fsdp * l.expert * l.context);
  const double layers = static_cast<double>(tc.model.layers) / l.pipe;
  const double loss = 6.0 * static_cast<double>(tc.model.vocab) / l.tensor;  // softmax and its gradient
  const double per_token = layers * (t.replicated + t.divided / l.tensor) + loss;
  return sizeof(float) * tokens * per_token / hw.hbm_bandwidth;
}

// Experts compute every slot of their capacity, filled or not: ceil(C T k / E) rows per
// sequence each (dropless: at most T, its bound here), where the FLOP count charges k per token. The FLOPs of
// the empty slots, over the whole batch, shared by every rank.
double expert_padding_seconds(const RunConfig& run, const cost::TrainConfig& tc, int ranks, double flops) {
  const nn::ModelConfig& m = run.model;
  if (m.experts <= 0 || flops <= 0) return 0.0;
  const double t = static_cast<double>(run.sequence_length()), e = static_cast<double>(m.experts);
  const double k = static_cast<double>(m.top_k);
  const double slots = m.capacity_factor > 0 ? e * std::ceil(m.capacity_factor * t * k / e) / t : e;
  const double per_expert = cost::count_params(tc.model).experts / e;  // one expert, all MoE layers
  return cost::train_flops(per_expert, std::max(0.0, slots - k)) * tc.batch_tokens / ranks / flops;
}

}  // namespace

double predict_compute_seconds(const RunConfig& run, const parallel::Mesh& mesh, const ComputeProbe* probe,
                               const parallel::PipelineParallel* pipeline) {
  cost::TrainConfig tc;
  tc.model = cost::shape_of(run.model);
  tc.model.context = run.sequence_length();  // the run's sequences, which may be shorter than the model's context
  tc.batch_tokens = static_cast<double>(run.batch * run.sequence_length());
  tc.remat = run.model.remat;
  tc.precision = cost::fp32_training();
  const cost::Layout layout{.data = mesh.size_of(parallel::kDataAxis),
                            .fsdp = mesh.size_of(parallel::kFsdpAxis),
                            .context = mesh.size_of(parallel::kContextAxis),
                            .pipe = mesh.size_of(parallel::kPipeAxis),
                            .expert = mesh.size_of(parallel::kExpertAxis),
                            .tensor = mesh.size_of(parallel::kTensorAxis),
                            .microbatches = run.grad_accum};
  const cost::HardwareProfile hw = cost::hardware("local");
  const cost::StepEstimate e = cost::estimate_train_step(tc, layout, hw);
  double busy = optimizer_seconds(run, tc, layout, hw, parallel::DataAxes::of(mesh).shard->size());
  if (probe) {  // a stage's periods of blocks and (the last stage's) head, every microbatch
    const double periods = static_cast<double>(run.model.n_layers) / layout.pipe / probe->period_blocks;
    busy += run.grad_accum * (periods * probe->period_seconds + probe->head_seconds);
  } else {
    busy += e.compute_seconds * (1.0 - e.bubble_fraction) + elementwise_seconds(run, tc, layout, hw) +
            expert_padding_seconds(run, tc, mesh.size(), hw.flops_fp32);
  }
  if (!pipeline) return busy / (1.0 - e.bubble_fraction);
  // The schedule in units of one microbatch's forward through a rank's stages: a rank is
  // busy 3m of them (forward 1, backward 2). Where ranks share cores, the probe timed each
  // at 1/sharing of a core, but in the schedule a rank's bubble lends its core to another:
  // the actions run up to `sharing` times faster than probed, and the cores cannot finish
  // before the busy time they are given -- the larger of the two.
  const parallel::PipelineSchedule& schedule = pipeline->schedule();
  const double sharing = probe ? probe->core_sharing : 1.0;
  const double unit = busy / (3.0 * schedule.microbatches) / sharing;
  const int64_t rows = run.batch / (layout.data * layout.fsdp * layout.expert);  // one data rank's
  const int64_t bytes = pipeline->message_bytes(rows, run.sequence_length());
  const double message = mesh.context().links.hop_seconds(mesh.axis_info(parallel::kPipeAxis).index, bytes);
  return std::max(busy, parallel::check(schedule, message / unit).makespan * unit);
}

}  // namespace shardlab::runtime
