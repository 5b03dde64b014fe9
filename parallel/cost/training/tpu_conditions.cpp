#include "parallel/cost/training/tpu_conditions.h"

#include <algorithm>
#include <cmath>

#include "parallel/cost/network/multipod.h"
#include "parallel/cost/training/axis_conditions.h"

namespace shardlab::cost {

LayoutConditions layout_conditions(const TrainConfig& c, const StepEstimate& e, const HardwareProfile& hw) {
  const Layout& l = e.layout;
  const int chips = l.num_ranks();
  const DType compute = c.precision.compute;
  // Each group with the chips nested inside it, innermost first (training/train_step.h's order).
  const PodSplit tensor = pod_split(l.tensor, 1, hw);
  const PodSplit expert = pod_split(l.expert, l.tensor, hw);
  const PodSplit pipe = pod_split(l.pipe, l.tensor * l.expert, hw);
  const PodSplit state = pod_split(l.fsdp * l.context, l.tensor * l.expert * l.pipe, hw);
  const PodSplit data = pod_split(l.data, l.tensor * l.expert * l.pipe * l.fsdp * l.context, hw);

  LayoutConditions k;
  k.pods = pods_spanned(chips, hw);
  k.dcn_ways = tensor.across_pods * expert.across_pods * pipe.across_pods * state.across_pods * data.across_pods;
  k.chips_per_domain = chips / k.dcn_ways;
  k.tokens_per_chip = e.tokens_per_chip;
  k.tokens_per_pod = c.batch_tokens / k.dcn_ways;
  k.alpha = dp_critical_batch(hw, 1, false, compute);
  k.data = data.in_pod, k.fsdp = state.in_pod, k.tensor = tensor.in_pod;
  k.data_axes = torus_axes_spanned(k.data, chips, hw);
  k.fsdp_axes = torus_axes_spanned(k.fsdp, chips, hw);
  k.tensor_axes = torus_axes_spanned(k.tensor, chips, hw);

  const double domain_tokens = e.tokens_per_chip * k.chips_per_domain;
  k.tokens_per_data_replica = domain_tokens / k.data;
  k.dp_critical = k.alpha * wire_critical_factor(c.precision.wire, false) / k.data_axes;
  // FSDP gathers the weights once per microbatch, so each gather serves 1/m of the tokens.
  k.tokens_per_fsdp_member = domain_tokens / (static_cast<double>(k.data) * k.fsdp * l.microbatches);
  k.fsdp_critical = k.alpha * wire_critical_factor(c.precision.wire, true) / k.fsdp_axes;
  k.tp_max_degree = tp_max_degree(c.model.d_ff, hw, k.tensor_axes, compute);
  k.fsdp_tp_critical = fsdp_tp_critical_batch(c.model.d_ff, hw, k.fsdp_axes, k.tensor_axes, compute);
  k.x_opt = optimal_fsdp_tp_split(domain_tokens, c.model.d_ff, k.chips_per_domain, k.fsdp_axes, k.tensor_axes).x_opt;

  k.context = l.context;
  if (l.context > 1 && c.context_comm == ContextComm::kRing) {
    const double t = l.tensor, kv_heads = std::max(1.0, static_cast<double>(c.model.kv_heads) / t);
    k.ring_tokens_per_shard = std::ceil(static_cast<double>(c.model.context) / l.context);
    k.ring_critical = ring_attention_critical_tokens(hw, c.model.heads / t, kv_heads,
                                                     bytes_of(c.precision.activations), kBalancedVisibleFraction, compute);
  }

  k.dcn_critical_per_pod = dcn_critical_batch_per_pod(hw, compute);
  k.dcn_hidden = k.dcn_ways == 1 || k.tokens_per_pod > k.dcn_critical_per_pod;
  for (const AxisComm& comm : e.comms)
    if (comm.path.find("dcn") != std::string::npos) k.dcn_crossing_seconds += comm.seconds;
  k.backward_seconds = e.compute_seconds * 2 / 3;
  k.dcn_crossing_hidden = k.dcn_crossing_seconds <= k.backward_seconds;

  const double ratios[] = {
      k.data > 1 ? k.dp_critical / k.tokens_per_data_replica : 0,
      k.fsdp > 1 ? k.fsdp_critical / k.tokens_per_fsdp_member : 0,
      k.tensor > 1 ? k.tensor / k.tp_max_degree : 0,
      k.dcn_ways > 1 ? k.dcn_critical_per_pod / k.tokens_per_pod : 0,
      k.ring_tokens_per_shard > 0 ? k.ring_critical / k.ring_tokens_per_shard : 0,
  };
  k.comm_to_compute = *std::max_element(std::begin(ratios), std::end(ratios));
  k.compute_bound_by_book = k.comm_to_compute <= 1;
  return k;
}

}  // namespace shardlab::cost
