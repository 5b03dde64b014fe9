#include "parallel/cost/training/cpu_step.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "parallel/cost/model/transformer.h"

namespace shardlab::cost {

double optimizer_seconds(const TrainConfig& c, const Layout& l, const HardwareProfile& hw, double optimizer_shards) {
  if (hw.hbm_bandwidth <= 0) return 0.0;
  const double params = count_params(c.model).total / (l.tensor * l.pipe * optimizer_shards);
  return sizeof(float) * 9.0 * params / hw.hbm_bandwidth;
}

double optimizer_shards(const Layout& l) {
  const int state = l.fsdp * l.context;
  return state > 1 ? state : l.zero >= 1 ? l.data : 1;
}

double elementwise_seconds(const TrainConfig& c, const Layout& l, const HardwareProfile& hw) {
  if (hw.hbm_bandwidth <= 0) return 0.0;
  const ElementwiseTraffic t = elementwise_elements_per_token_layer(c.model, c.model.context);
  const double tokens = c.batch_tokens / (l.data * l.fsdp * l.expert * l.context);
  const double layers = static_cast<double>(c.model.layers) / l.pipe;
  const double loss = 6.0 * static_cast<double>(c.model.vocab) / l.tensor;  // softmax and its gradient
  // Sequence parallelism splits the norms and residuals over the tensor ranks too.
  const double replicated = l.sequence_parallel ? t.replicated / l.tensor : t.replicated;
  const double per_token = layers * (replicated + t.divided / l.tensor) + loss;
  return sizeof(float) * tokens * per_token / hw.hbm_bandwidth;
}

double expert_padding_seconds(const TrainConfig& c, double capacity_factor, int ranks, double flops) {
  const TransformerShape& m = c.model;
  if (m.experts <= 0 || flops <= 0) return 0.0;
  const double t = static_cast<double>(m.context), e = static_cast<double>(m.experts);
  const double k = static_cast<double>(m.top_k);
  const double slots = capacity_factor > 0 ? e * std::ceil(capacity_factor * t * k / e) / t : e;
  const double per_expert = count_params(m).experts / e;  // one expert, all MoE layers
  return train_flops(per_expert, std::max(0.0, slots - k)) * c.batch_tokens / ranks / flops;
}

double core_sharing(int ranks, int threads, int cores) {
  if (cores <= 0) cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1.0, static_cast<double>(ranks) * threads / cores);
}

}  // namespace shardlab::cost
