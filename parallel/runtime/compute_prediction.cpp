#include "parallel/runtime/compute_prediction.h"

#include <algorithm>
#include <cmath>

#include "parallel/comm/comm_context.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/training/cpu_step.h"
#include "parallel/cost/training/train_step.h"

namespace shardlab::runtime {

double predict_compute_seconds(const RunConfig& run, const parallel::Layout& layout, const ComputeProbe* probe,
                               const parallel::PipelineSchedule* schedule, double message_seconds) {
  cost::TrainConfig tc;
  tc.model = cost::shape_of(run.model);
  tc.model.context = run.sequence_length();  // the run's sequences, which may be shorter than the model's context
  tc.batch_tokens = static_cast<double>(run.batch * run.sequence_length());
  tc.remat = run.model.remat;
  tc.precision = cost::fp32_training();
  const cost::HardwareProfile hw = cost::hardware("local");
  const cost::StepEstimate e = cost::estimate_train_step(tc, layout, hw);
  // The optimizer's pass, over this rank's ZeRO shard (cost/training/cpu_step.h).
  double busy = cost::optimizer_seconds(tc, layout, hw, cost::optimizer_shards(layout));
  if (probe) {  // a stage's periods of blocks and (the last stage's) head, every microbatch
    const double periods = static_cast<double>(run.model.n_layers) / layout.pipe / probe->period_blocks;
    busy += run.grad_accum * (periods * probe->period_seconds + probe->head_seconds);
  } else {
    busy += e.compute_seconds * (1.0 - e.bubble_fraction) + cost::elementwise_seconds(tc, layout, hw) +
            cost::expert_padding_seconds(tc, run.model.capacity_factor, layout.num_ranks(), hw.flops_fp32);
  }
  if (!schedule) return busy / (1.0 - e.bubble_fraction);
  // The schedule in units of one microbatch's forward through a rank's stages: a rank is
  // busy 3m of them (forward 1, backward 2). Where ranks share cores, the probe timed each
  // at 1/sharing of a core, but in the schedule a rank's bubble lends its core to another:
  // the actions run up to `sharing` times faster than probed, and the cores cannot finish
  // before the busy time they are given -- the larger of the two.
  const double sharing = probe ? probe->core_sharing : 1.0;
  const double unit = busy / (3.0 * schedule->microbatches) / sharing;
  return std::max(busy, parallel::check(*schedule, message_seconds / unit).makespan * unit);
}

double predict_compute_seconds(const RunConfig& run, const parallel::Mesh& mesh, const ComputeProbe* probe,
                               const parallel::PipelineParallel* pipeline) {
  const parallel::Layout layout = mesh_layout(run, mesh);
  if (!pipeline) return predict_compute_seconds(run, layout, probe);
  const int64_t rows = run.batch / layout.data_ranks();  // one data rank's
  const int64_t bytes = pipeline->message_bytes(rows, run.sequence_length());
  const double message = mesh.context().links.hop_seconds(mesh.axis_info(parallel::kPipeAxis).index, bytes);
  return predict_compute_seconds(run, layout, probe, &pipeline->schedule(), message);
}

}  // namespace shardlab::runtime
