#include "parallel/cost/network/multipod.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "parallel/cost/training/axis_conditions.h"

namespace shardlab::cost {
namespace {

// Each chip's own DCN share, as one ring over `size` pods: NICs send one way at a time.
CollectiveCost dcn_collective(CollectiveOp op, double bytes, int size, const HardwareProfile& hw) {
  CollectiveCost c = torus_collective(op, bytes, {{size, true}}, hw.dcn, false);
  c.path = "dcn";
  return c;
}

// A group of `size` chips inside one pod, on the ICI links of the dimensions it spans.
CollectiveCost ici_collective(CollectiveOp op, double bytes, int size, int chips, const HardwareProfile& hw) {
  const double side = std::pow(std::min(chips, hw.node_size), 1.0 / hw.torus_axes);
  const int spans = torus_axes_spanned(size, chips, hw);
  const int ring = std::max(2, static_cast<int>(std::lround(std::pow(size, 1.0 / spans))));
  const bool whole_side = ring >= static_cast<int>(std::lround(side));
  std::vector<RingAxis> axes(spans, RingAxis{ring, whole_side && hw.axis_wraps(ring)});
  return torus_collective(op, bytes, axes, hw.ici, true);
}

}  // namespace

int pods_spanned(int chips, const HardwareProfile& hw) {
  if (hw.interconnect == Interconnect::kSwitched || chips <= hw.node_size) return 1;
  return static_cast<int>((static_cast<int64_t>(chips) + hw.node_size - 1) / hw.node_size);
}

PodSplit pod_split(int size, int inner, const HardwareProfile& hw) {
  if (hw.interconnect == Interconnect::kSwitched || static_cast<int64_t>(size) * inner <= hw.node_size)
    return {size, 1};
  const int room = std::max(1, hw.node_size / std::max(inner, 1));
  int in_pod = 1;
  for (int d = std::min(room, size); d >= 1; --d)
    if (size % d == 0) {
      in_pod = d;
      break;
    }
  return {in_pod, size / in_pod};
}

int torus_axes_spanned(int size, int chips, const HardwareProfile& hw) {
  if (hw.interconnect == Interconnect::kSwitched || size <= 1) return 1;
  const double side = std::pow(std::min(chips, hw.node_size), 1.0 / hw.torus_axes);
  if (side <= 1.5) return 1;
  return std::clamp(static_cast<int>(std::lround(std::log(size) / std::log(side))), 1, hw.torus_axes);
}

CollectiveCost torus_axis_collective(CollectiveOp op, double bytes, int size, int inner, int chips,
                                     const HardwareProfile& hw) {
  if (size <= 1) return {};
  const PodSplit split = pod_split(size, inner, hw);
  if (split.across_pods == 1) return ici_collective(op, bytes, size, chips, hw);
  const CollectiveCost across = dcn_collective(op, bytes / split.in_pod, split.across_pods, hw);
  if (split.in_pod == 1) return across;
  // all_gather: across pods on each chip's 1/in_pod part first, then within the pod on the
  // whole; reduce_scatter the mirror image; all_reduce = reduce_scatter + all_gather.
  const CollectiveCost within = ici_collective(op, bytes, split.in_pod, chips, hw);
  CollectiveCost c;
  c.bandwidth_seconds = within.bandwidth_seconds + across.bandwidth_seconds;
  c.latency_seconds = within.latency_seconds + across.latency_seconds;
  c.seconds = within.seconds + across.seconds;
  c.hops = within.hops + across.hops;
  c.latency_bound = c.latency_seconds > c.bandwidth_seconds;
  c.path = "ici+dcn";
  return c;
}

double dcn_critical_batch_per_pod(const HardwareProfile& hw, DType compute) {
  return dp_critical_batch(hw, 1, true, compute) * hw.node_size;
}

}  // namespace shardlab::cost
