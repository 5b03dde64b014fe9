#include "parallel/cost/training/gpu_conditions.h"

#include <algorithm>

#include "framework/error.h"
#include "parallel/cost/network/fat_tree.h"
#include "parallel/cost/roofline/roofline.h"
#include "parallel/cost/training/axis_conditions.h"

namespace shardlab::cost {
namespace {

// Bytes/s of an all_gather over one axis of `size` GPUs with `inner` GPUs nested inside:
// the probe's size cancels (every cost is linear in V); latency left out, as the book does.
CollectiveCost probe(int size, int inner, int chips, const HardwareProfile& hw) {
  return axis_collective(CollectiveOp::kAllGather, 1e9, size, inner, chips, hw);
}

}  // namespace

GpuConditions gpu_conditions(const TrainConfig& c, const StepEstimate& e, const HardwareProfile& hw) {
  if (hw.interconnect != Interconnect::kSwitched)
    throw UserError(hw.name + " is a torus: its conditions are layout_conditions (training.md), not the GPU chapter's");
  const Layout& l = e.layout;
  const int chips = l.num_ranks();
  const double flops = peak_flops(hw, c.precision.compute);
  const double ff = static_cast<double>(c.model.d_ff);
  GpuConditions g;
  g.node_size = hw.node_size;
  g.tokens_per_gpu = e.tokens_per_chip;
  g.alpha_gpu = flops / hw.ici.bandwidth;
  g.alpha_node = flops / (hw.node_size * hw.dcn.bandwidth);

  g.batch = l.data * l.fsdp * l.context;
  g.batch_inner = l.pipe * l.expert * l.tensor;
  g.batch_nodes = std::max(1, chips / hw.node_size);
  const bool gathers_per_microbatch = l.fsdp * l.context > 1;
  g.tokens_per_gather = e.tokens_per_chip / (gathers_per_microbatch ? l.microbatches : 1);
  if (g.batch > 1) {
    const CollectiveCost b = probe(g.batch, g.batch_inner, chips, hw);
    g.batch_bandwidth = g.batch_inner * 1e9 / b.bandwidth_seconds;
    g.batch_path = b.path;
    const int gpus = g.batch * g.batch_inner;
    g.batch_sharp = hw.sharp && !gathers_per_microbatch &&
                    (gpus <= hw.node_size || spans_whole_nodes(CollectiveOp::kAllReduce, g.batch, g.batch_inner, hw));
    if (g.batch_sharp) {
      // The array sharded over the inner GPUs, as fat_tree_axis_collective gives it.
      const GpuCollective r = fat_tree_collective(fat_tree_for(hw, gpus), CollectiveOp::kAllReduce,
                                                  1e9 * g.batch_inner, gpus, {.inner = g.batch_inner, .sharp = true});
      g.batch_bandwidth = 2 * g.batch_inner * 1e9 / r.seconds;
      g.batch_path = "SHARP all_reduce (fat tree, " + r.bound_level + "-bound)";
    }
    g.batch_critical = wire_critical_factor(c.precision.wire, gathers_per_microbatch) * flops / g.batch_bandwidth;
    if (c.model.experts > 0) g.moe_batch_critical = moe_critical_batch(g.batch_critical, c.model.experts, c.model.top_k);
  }

  g.tensor = l.tensor;
  if (l.tensor > 1) {
    g.tensor_bandwidth = 1e9 / probe(l.tensor, 1, chips, hw).bandwidth_seconds;
    g.tp_max_degree = ff * g.tensor_bandwidth / flops;
  }

  g.expert = l.expert;
  g.expert_per_node = std::max(1, std::min(l.expert, hw.node_size / l.tensor));
  if (l.expert > g.expert_per_node) {
    const double z = l.expert, local = g.expert_per_node, k = static_cast<double>(std::max<int64_t>(1, c.model.top_k));
    g.ep_ratio = g.alpha_node * (z - local) * std::min(local * k / z, 1.0) / (k * ff);
  }

  g.pipe = l.pipe, g.microbatches = l.microbatches;
  if (l.pipe > 1) {
    // Each of a stage's expert x tensor GPUs sends its share of a microbatch's activations,
    // over NVLink while the stage boundary stays in a node, else over its own NIC.
    const double microbatch_tokens = c.batch_tokens / (g.batch * static_cast<double>(l.microbatches));
    const double bytes = 2 * microbatch_tokens * c.model.d_model / (l.expert * l.tensor);
    const bool in_node = l.pipe * l.expert * l.tensor <= hw.node_size;
    const double w = in_node ? hw.ici.bandwidth : hw.dcn.bandwidth;
    g.pp_seconds = (l.microbatches + l.pipe - 2) * bytes / w;
    g.pp_ratio = e.compute_seconds > 0 ? g.pp_seconds / e.compute_seconds : 0;
  }

  const double ratios[] = {
      g.batch > 1 ? std::max(g.batch_critical, g.moe_batch_critical) / g.tokens_per_gather : 0,
      g.tensor > 1 ? g.tensor / g.tp_max_degree : 0,
      g.ep_ratio,
      g.pp_ratio,
  };
  g.comm_to_compute = *std::max_element(std::begin(ratios), std::end(ratios));
  g.compute_bound_by_book = g.comm_to_compute <= 1;
  return g;
}

}  // namespace shardlab::cost
