#include "parallel/cost/network/collective.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "framework/error.h"
#include "parallel/cost/network/fat_tree.h"

namespace shardlab::cost {
namespace {

CollectiveCost finish(double bandwidth_seconds, int hops, double latency, std::string path) {
  CollectiveCost c;
  c.bandwidth_seconds = bandwidth_seconds;
  c.hops = hops;
  c.latency_seconds = hops * latency;
  c.seconds = std::max(c.bandwidth_seconds, c.latency_seconds);
  c.latency_bound = c.latency_seconds > c.bandwidth_seconds;
  c.path = std::move(path);
  return c;
}

void check_args(CollectiveOp op, double bytes) {
  if (op != CollectiveOp::kAllGather && op != CollectiveOp::kReduceScatter && op != CollectiveOp::kAllReduce &&
      op != CollectiveOp::kAllToAll)
    throw UserError("the cost model has no formula for " + to_string(op) +
                    "; use all_gather, reduce_scatter, all_reduce or all_to_all");
  if (!(bytes >= 0) || !std::isfinite(bytes))
    throw UserError("collective size must be a non-negative number of bytes, got " + std::to_string(bytes));
}

// Sequential shard steps of an all_gather on one axis (see the header).
int gather_hops(const RingAxis& axis, bool bidirectional) {
  if (axis.wraparound && bidirectional) return axis.size / 2;  // == ceil((n-1)/2)
  return axis.size - 1;
}

// Bytes on the busiest link direction of an all_to_all, in units of V/n^2.
double all_to_all_link_load(const RingAxis& axis, bool bidirectional) {
  const double n = axis.size;
  if (!axis.wraparound) return std::floor(n / 2) * std::ceil(n / 2);
  if (!bidirectional) return n * (n - 1) / 2;
  return axis.size % 2 == 0 ? n * n / 8 : (n * n - 1) / 8;
}

int all_to_all_hops(const RingAxis& axis, bool bidirectional) {
  return axis.wraparound && bidirectional ? axis.size / 2 : axis.size - 1;
}

}  // namespace

CollectiveCost torus_collective(CollectiveOp op, double bytes, const std::vector<RingAxis>& axes,
                                LinkSpec link, bool bidirectional) {
  check_args(op, bytes);
  std::vector<RingAxis> active;
  double group = 1;
  for (const RingAxis& a : axes) {
    if (a.size < 1) throw UserError("mesh axis size must be >= 1, got " + std::to_string(a.size));
    if (a.size > 1) active.push_back(a);
    group *= a.size;
  }
  if (active.empty() || bytes == 0) return finish(0, 0, link.latency, "none");
  if (link.bandwidth <= 0) throw UserError("link bandwidth must be positive");
  const double k = static_cast<double>(active.size());
  int hops = 0;
  if (op == CollectiveOp::kAllToAll) {
    const RingAxis widest = *std::max_element(active.begin(), active.end(),
                                              [](const RingAxis& a, const RingAxis& b) { return a.size < b.size; });
    const double n = widest.size;
    const double v_axis = bytes * n / group;
    for (const RingAxis& a : active) hops += all_to_all_hops(a, bidirectional);
    const double load = all_to_all_link_load(widest, bidirectional) * v_axis / (n * n);
    return finish(load / link.bandwidth, hops, link.latency, "ici");
  }
  double shard_fraction = 0;  // the slowest axis' hops per chip, h/n
  for (const RingAxis& a : active) {
    hops += gather_hops(a, bidirectional);
    shard_fraction = std::max(shard_fraction, static_cast<double>(gather_hops(a, bidirectional)) / a.size);
  }
  const double passes = op == CollectiveOp::kAllReduce ? 2 : 1;
  return finish(passes * bytes * shard_fraction / (k * link.bandwidth), static_cast<int>(passes) * hops,
                link.latency, "ici");
}

CollectiveCost gpu_collective(CollectiveOp op, double bytes, int gpus, const HardwareProfile& hw) {
  check_args(op, bytes);
  if (gpus < 1) throw UserError("GPU count must be >= 1, got " + std::to_string(gpus));
  if (gpus == 1 || bytes == 0) return finish(0, 0, hw.ici.latency, "none");
  if (spans_whole_nodes(op, gpus, 1, hw)) return fat_tree_axis_collective(op, bytes, gpus, 1, hw);
  const double n_total = gpus;
  const double w = hw.ici.bandwidth;
  if (gpus <= hw.node_size) {
    if (op == CollectiveOp::kAllToAll)
      return finish((n_total - 1) * bytes / (n_total * n_total * w), 1, hw.ici.latency, "nvlink");
    if (op == CollectiveOp::kAllReduce && hw.sharp)  // up into the NVSwitch and the sum back down
      return finish(bytes / w, 2, hw.ici.latency, "nvlink SHARP");
    const double passes = op == CollectiveOp::kAllReduce ? 2 : 1;
    return finish(passes * (n_total - 1) / n_total * bytes / w, static_cast<int>(passes) * (gpus - 1),
                  hw.ici.latency, "nvlink");
  }
  // A group that does not fill whole nodes (12 GPUs on nodes of 8) has gcd(gpus, node)
  // GPUs in each node it spans -- the rest of each node runs other groups -- so its
  // hierarchical collective is n-way on NVLink and m-way across nodes with n x m = gpus.
  const double n = std::gcd(gpus, hw.node_size), m = n_total / n;
  if (op == CollectiveOp::kAllToAll) {
    const double over_nic = (n_total - n) * bytes / (n_total * n_total * hw.dcn.bandwidth);
    const double over_nvlink = (n - 1) * bytes / (n_total * n_total * w);
    return finish(std::max(over_nic, over_nvlink), 1, hw.dcn.latency, "nvlink+infiniband");
  }
  const double passes = op == CollectiveOp::kAllReduce ? 2 : 1;
  const double across = (m - 1) / m * (bytes / n) / hw.dcn.bandwidth;
  const double within = (n - 1) / n * bytes / w;
  CollectiveCost c = finish(passes * (across + within), 0, 0, "nvlink+infiniband (hierarchical)");
  c.hops = static_cast<int>(passes) * (static_cast<int>(n) - 1 + static_cast<int>(m) - 1);
  c.latency_seconds = passes * ((n - 1) * hw.ici.latency + (m - 1) * hw.dcn.latency);
  c.seconds = std::max(c.bandwidth_seconds, c.latency_seconds);
  c.latency_bound = c.latency_seconds > c.bandwidth_seconds;
  return c;
}

CollectiveCost collective_cost(CollectiveOp op, double bytes, const std::vector<int>& axis_sizes,
                               const HardwareProfile& hw, bool bidirectional) {
  if (hw.interconnect == Interconnect::kSwitched) {
    int gpus = 1;
    for (int s : axis_sizes) gpus *= s;
    return gpu_collective(op, bytes, gpus, hw);
  }
  std::vector<RingAxis> axes;
  for (int s : axis_sizes) axes.push_back({s, hw.axis_wraps(s)});
  return torus_collective(op, bytes, axes, hw.ici, bidirectional);
}

double collective_time(CollectiveOp op, double bytes, int group_size, LinkSpec link, bool wraparound,
                       bool bidirectional) {
  return torus_collective(op, bytes, {{group_size, wraparound}}, link, bidirectional).seconds;
}

double latency_bound_bytes(double latency_seconds, double bandwidth_seconds, double bytes) {
  if (latency_seconds <= 0) return 0;
  if (bandwidth_seconds <= 0) return std::numeric_limits<double>::infinity();
  return bytes * latency_seconds / bandwidth_seconds;
}

namespace {

void check_coordinates(const std::vector<int>& sizes, const std::vector<int>& coordinates, const char* which) {
  if (coordinates.size() != sizes.size())
    throw UserError(std::string(which) + " has " + std::to_string(coordinates.size()) + " coordinates but the mesh has " +
                    std::to_string(sizes.size()) + " axes; give one per axis");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (coordinates[i] < 0 || coordinates[i] >= sizes[i])
      throw UserError(std::string(which) + " coordinate " + std::to_string(coordinates[i]) + " is outside axis " +
                      std::to_string(i) + " of size " + std::to_string(sizes[i]) + "; use 0.." +
                      std::to_string(sizes[i] - 1));
}

TransferCost finish_transfer(double bytes, int hops, int links, LinkSpec link, std::string path) {
  TransferCost t;
  t.hops = hops;
  t.links = links;
  t.path = std::move(path);
  if (hops == 0 || bytes == 0) {
    t.path = "none";
    return t;
  }
  t.first_byte_seconds = hops * link.latency;
  t.bandwidth_seconds = bytes / (links * link.bandwidth);
  t.seconds = t.first_byte_seconds + t.bandwidth_seconds;
  return t;
}

}  // namespace

TransferCost torus_transfer(double bytes, const std::vector<RingAxis>& axes, const std::vector<int>& from,
                            const std::vector<int>& to, LinkSpec link) {
  if (!(bytes >= 0) || !std::isfinite(bytes))
    throw UserError("transfer size must be a non-negative number of bytes, got " + std::to_string(bytes));
  std::vector<int> sizes;
  for (const RingAxis& a : axes) sizes.push_back(a.size);
  check_coordinates(sizes, from, "--from");
  check_coordinates(sizes, to, "--to");
  int hops = 0, links = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int d = std::abs(to[i] - from[i]);
    const int distance = axes[i].wraparound ? std::min(d, axes[i].size - d) : d;
    hops += distance;
    links += distance > 0;
  }
  return finish_transfer(bytes, hops, links, link, "ici");
}

TransferCost transfer_cost(double bytes, const std::vector<int>& axis_sizes, const std::vector<int>& from,
                           const std::vector<int>& to, const HardwareProfile& hw) {
  if (hw.interconnect == Interconnect::kTorus) {
    std::vector<RingAxis> axes;
    for (int s : axis_sizes) axes.push_back({s, hw.axis_wraps(s)});
    return torus_transfer(bytes, axes, from, to, hw.ici);
  }
  check_coordinates(axis_sizes, from, "--from");
  check_coordinates(axis_sizes, to, "--to");
  const auto rank = [&](const std::vector<int>& c) {
    int r = 0;
    for (size_t i = 0; i < c.size(); ++i) r = r * axis_sizes[i] + c[i];
    return r;
  };
  const int a = rank(from), b = rank(to);
  if (a == b) return finish_transfer(bytes, 0, 0, hw.ici, "none");
  const bool same_node = a / hw.node_size == b / hw.node_size;
  return finish_transfer(bytes, 1, 1, same_node ? hw.ici : hw.dcn, same_node ? "nvlink" : "infiniband");
}

double allgather_bandwidth(const HardwareProfile& hw, int axes, bool across_nodes) {
  if (across_nodes) return hw.node_size * hw.dcn.bandwidth;
  if (hw.interconnect == Interconnect::kSwitched) return hw.ici.bandwidth;
  return 2 * hw.ici.bandwidth * std::max(axes, 1);
}

CollectiveCost ragged_all_to_all(const CollectiveCost& dense, int nonzero, int group) {
  if (nonzero < 1 || group < 1) {
    throw UserError("a ragged all_to_all needs >= 1 non-zero block (got " + std::to_string(nonzero) + ") of a group of >= 1 (got " +
                    std::to_string(group) + ")");
  }
  CollectiveCost c = dense;
  c.bandwidth_seconds *= std::min(1.0, static_cast<double>(nonzero) / group);
  c.seconds = std::max(c.bandwidth_seconds, c.latency_seconds);
  c.latency_bound = c.latency_seconds > c.bandwidth_seconds;
  return c;
}

}  // namespace shardlab::cost
