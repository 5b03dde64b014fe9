#include "parallel/cost/network/fat_tree.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "framework/error.h"

namespace shardlab::cost {
namespace {

constexpr int kNodesPerSu = 32;  // the reference SuperPod's Scalable Unit
constexpr int kIbSwitchPorts = 64;  // NDR InfiniBand switches, leaf and spine

}  // namespace

FatTree fat_tree(const HardwareProfile& hw, int sus, double oversubscription) {
  if (hw.interconnect != Interconnect::kSwitched)
    throw UserError(hw.name + " is a torus, not a switched GPU network; give a GPU profile (a100, h100, h200, b200, gb200-nvl72)");
  if (sus < 1) throw UserError("SUs " + std::to_string(sus) + " must be at least 1");
  if (!(oversubscription >= 1))
    throw UserError("oversubscription " + format_number(oversubscription) + " must be >= 1 (1: full bisection)");
  FatTree t;
  const int n = hw.node_size;
  t.node_egress = n * hw.dcn.bandwidth;
  const int leaves = sus * n;  // one per GPU rail (NIC) in each SU
  t.levels.push_back({"node", n, 1, hw.ici.bandwidth, sus * kNodesPerSu * hw.facts.switches_per_node});
  t.levels.push_back({"leaf", kNodesPerSu, n, t.node_egress, leaves});
  if (sus > 1) {
    // Each leaf sends its SU's share up on (ports - nodes) links, fewer when oversubscribed.
    const double uplinks = leaves * (kIbSwitchPorts - kNodesPerSu) / oversubscription;
    t.levels.push_back({"spine", sus, kNodesPerSu * n, kNodesPerSu * t.node_egress / oversubscription,
                        static_cast<int>(std::ceil(uplinks / kIbSwitchPorts))});
  }
  return t;
}

int FatTree::switches() const {
  int total = 0;
  for (const FatTreeLevel& l : levels) total += l.switches;
  return total;
}

FatTree fat_tree_for(const HardwareProfile& hw, int gpus) {
  const int su_gpus = kNodesPerSu * hw.node_size;
  return fat_tree(hw, std::max(1, (gpus + su_gpus - 1) / su_gpus));
}

GpuCollective fat_tree_collective(const FatTree& tree, CollectiveOp op, double bytes, int gpus,
                                  const CollectiveOptions& o) {
  if (!(bytes >= 0)) throw UserError("collective size must be >= 0 bytes, got " + format_number(bytes));
  const int top = tree.levels.back().gpus();
  if (gpus < 1 || gpus > top)
    throw UserError("a group of " + std::to_string(gpus) + " GPUs does not fit the tree's " + std::to_string(top) +
                    "; give 1.." + std::to_string(top) + " (or more SUs)");
  if (o.inner < 1 || gpus % o.inner != 0)
    throw UserError("inner axis " + std::to_string(o.inner) + " does not divide the group of " + std::to_string(gpus) +
                    " GPUs; choose a size that divides it");
  if (op == CollectiveOp::kAllToAll && o.inner > 1)
    throw UserError("an all_to_all with an inner axis is not modelled (the book gives none); drop --inner");
  if (op != CollectiveOp::kAllGather && op != CollectiveOp::kReduceScatter && op != CollectiveOp::kAllReduce &&
      op != CollectiveOp::kAllToAll)
    throw UserError("the fat tree prices all_gather, reduce_scatter, all_reduce and all_to_all");
  GpuCollective c;
  const FatTreeLevel& node = tree.levels.front();
  double worst = 0, per_gpu = node.per_gpu();
  for (const FatTreeLevel& level : tree.levels) {
    if (level.child_gpus >= gpus) break;  // the group sits below this level
    if (gpus % level.child_gpus != 0) {
      throw UserError("a group of " + std::to_string(gpus) + " GPUs is not whole " + level.name + " children of " +
                      std::to_string(level.child_gpus) + " GPUs; give a multiple of " + std::to_string(level.child_gpus));
    }
    const int degree = std::min(level.degree, gpus / level.child_gpus);
    const double spread = static_cast<double>(std::max(o.inner, level.child_gpus)) * level.per_gpu();
    const double factor = op == CollectiveOp::kAllReduce && o.sharp ? 1.0 : (degree - 1.0) / degree;
    const double seconds = (op == CollectiveOp::kAllReduce && !o.sharp ? 2 : 1) * bytes * factor / spread;
    const double v = bytes * std::min(1.0, static_cast<double>(level.child_gpus) / o.inner);
    const bool top = degree * level.child_gpus >= gpus;
    LevelTime t{level.name, degree, seconds, 0, 0, level.link_bandwidth};
    if (op == CollectiveOp::kAllGather) t.switch_in = v, t.switch_out = degree * v - (top ? v : 0);
    if (op == CollectiveOp::kAllReduce && o.sharp) t.switch_in = t.switch_out = degree * v;
    c.levels.push_back(t);
    per_gpu = level.per_gpu();
    if (seconds >= worst) worst = seconds, c.bound_level = level.name;
  }
  if (op == CollectiveOp::kAllToAll) {
    // Not hierarchical: every GPU sends to every other. In a node V (N - 1) / (N^2 W_gpu);
    // across M nodes the node egress carries V (M - 1) / M^2 (through the narrowest uplink
    // per node when the group spans SUs).
    const int n = node.degree;
    const double m = gpus <= n ? gpus : static_cast<double>(gpus) / n;
    double w = gpus <= n ? node.link_bandwidth : tree.node_egress;
    if (tree.levels.size() > 2 && gpus > tree.levels[2].child_gpus)
      w = std::min(w, tree.levels[2].link_bandwidth / (tree.levels[2].child_gpus / n));
    worst = m > 1 ? bytes * (m - 1) / (m * m * w) : 0;
    c.levels = {{gpus <= n ? "node" : "leaf", static_cast<int>(m), worst}};
    c.bound_level = c.levels.front().level;
  }
  c.seconds = worst;
  c.bandwidth = worst > 0 ? bytes / worst : 0;
  c.bisection_bandwidth = gpus * per_gpu;
  return c;
}

bool spans_whole_nodes(CollectiveOp op, int size, int inner, const HardwareProfile& hw) {
  const int64_t gpus = static_cast<int64_t>(size) * inner, su_gpus = static_cast<int64_t>(kNodesPerSu) * hw.node_size;
  return hw.interconnect == Interconnect::kSwitched && size > 1 && gpus > hw.node_size &&
         gpus % hw.node_size == 0 && (gpus <= su_gpus || gpus % su_gpus == 0) &&
         !(op == CollectiveOp::kAllToAll && inner > 1);
}

CollectiveCost fat_tree_axis_collective(CollectiveOp op, double bytes, int size, int inner, const HardwareProfile& hw) {
  if (!spans_whole_nodes(op, size, inner, hw)) {
    throw UserError("an axis of " + std::to_string(size) + " GPUs inside " + std::to_string(inner) +
                    " does not span whole nodes of " + std::to_string(hw.node_size) + " on " + hw.name +
                    "; price it with gpu_collective");
  }
  const int gpus = size * inner;
  const bool sharp = hw.sharp && op == CollectiveOp::kAllReduce;
  const GpuCollective g =
      fat_tree_collective(fat_tree_for(hw, gpus), op, bytes * inner, gpus, {.inner = inner, .sharp = sharp});
  // The axis' ring: `within` members share a node, `across` nodes.
  const int within = std::max(1, std::min(size, hw.node_size / inner));
  const int across = size / within;
  const int passes = op == CollectiveOp::kAllReduce ? 2 : 1;
  CollectiveCost c;
  c.bandwidth_seconds = g.seconds;
  if (sharp) {  // up the tree and back down: one NVLink and one NIC hop each way
    c.hops = 2;
    c.latency_seconds = 2 * (hw.ici.latency + hw.dcn.latency);
  } else {
    c.hops = op == CollectiveOp::kAllToAll ? 1 : passes * (within - 1 + across - 1);
    c.latency_seconds = op == CollectiveOp::kAllToAll
                            ? hw.dcn.latency
                            : passes * ((within - 1) * hw.ici.latency + (across - 1) * hw.dcn.latency);
  }
  c.seconds = std::max(c.bandwidth_seconds, c.latency_seconds);
  c.latency_bound = c.latency_seconds > c.bandwidth_seconds;
  c.path = std::string(sharp ? "SHARP " : "") + "nvlink+infiniband (fat tree, " + g.bound_level + "-bound)";
  return c;
}

}  // namespace shardlab::cost
