// Collective time on TPU tori and GPU clusters (book chapters "sharding" and "gpus").
//
// V (`bytes`) is always the size of the whole logical array: the gathered result of an
// all_gather, the unreduced input of a reduce_scatter, the array being all-reduced, and the
// global array of an all_to_all (each of N chips holds V/N before and after).
//
// Torus axis of n chips, link bandwidth W (one direction) and hop latency t:
//   all_gather / reduce_scatter: h hops of one shard (V/n bytes) each, where
//     h = ceil((n-1)/2) on a bidirectional ring with wraparound (shards go the short way),
//     h = n-1 on a unidirectional ring or on a line (no wraparound: the end chips' single
//         link carries n-1 shards);
//     T = max(h * V/(n W), h * t)  -- the per-hop max(latency, bytes/W): latency-bound below
//     W * t bytes per shard (45 kB on v5e). Even n bidirectional: h/n = 1/2, the book's
//     V / W_bidirectional.
//   several axes (k of size > 1) at once: all their links carry data concurrently, so the
//     bandwidth term divides by k (the book's V / (k W_bidir)); hops add up.
//   all_reduce = reduce_scatter + all_gather (twice the time).
//   all_to_all: the busiest link direction carries sum(distance) * V/n^2 bytes: V/8 on a
//     bidirectional ring (V / (4 W_bidir)), (n-1)V/(2n) unidirectional, floor(n/2)ceil(n/2)
//     V/n^2 on a line; on several axes the largest axis binds: V_eff = V * n_max / N (the
//     book's V max(A,B,C) / (4 N W)).
// GPU (Interconnect::kSwitched) with W = one GPU's NVLink egress, node of n GPUs:
//   in a node: all_gather (N-1)/N V/W (ring steps N-1), all_to_all (N-1) V/(N^2 W);
//   across whole nodes: the book's fat tree (network/fat_tree.h, fat_tree_axis_collective), the
//     slowest of its levels: all_gather V max_i (D_i-1)/(D_i S_i w_i) -- NVLink in the
//     node, node egress at the leaf (413 GB/s over an H100 SU), the spine past an SU.
//   a group sharing its nodes with others (12 GPUs on nodes of 8): n = gcd(N, node) GPUs
//     per node, hierarchical -- rail-wise across nodes on V/n, then within the node:
//     all_gather = (M-1)/M (V/n)/W_ib + (n-1)/n V/W, all_reduce twice that; all_to_all
//     sends the off-node share (N-n)V/N^2 over the NIC while the rest goes over NVLink.
//
//   double t = collective_time(CollectiveOp::kAllReduce, 64 << 20, 4, link, true, true);
//   CollectiveCost c = collective_cost(CollectiveOp::kAllGather, 33.5e6, {8, 4}, hw);
#pragma once

#include <string>
#include <vector>

#include "parallel/spec/collective_op.h"
#include "parallel/cost/hardware/hardware.h"

namespace shardlab::cost {

// Which collective: the runtime's own enum (parallel/spec/collective_op.h). Every function below
// prices all_gather, reduce_scatter, all_reduce and all_to_all; the point-to-point ops
// (ppermute, send, recv) throw UserError.
using parallel::CollectiveOp;

struct CollectiveCost {
  double seconds = 0;            // max(bandwidth_seconds, latency_seconds)
  double bandwidth_seconds = 0;  // bytes over links
  double latency_seconds = 0;    // hops * per-hop latency
  int hops = 0;                  // sequential neighbour steps
  bool latency_bound = false;    // latency term dominates
  std::string path;              // which links carry it, e.g. "ici", "nvlink+infiniband"
};

// One axis of a ring or torus.
struct RingAxis {
  int size = 1;
  bool wraparound = true;
};

// The torus model above on explicit axes and one kind of link.
CollectiveCost torus_collective(CollectiveOp op, double bytes, const std::vector<RingAxis>& axes,
                                LinkSpec link, bool bidirectional = true);
// GPUs: within an NVSwitch node; over whole nodes by the fat tree; otherwise hierarchical
// (n = gcd(gpus, node_size) GPUs per node on NVLink, gpus / n nodes over the NICs).
CollectiveCost gpu_collective(CollectiveOp op, double bytes, int gpus, const HardwareProfile& hw);
// Dispatch on hw.interconnect. Torus: one RingAxis per entry of axis_sizes, wraparound as
// hw.axis_wraps(size), links hw.ici. Switched: the group is the product of axis_sizes.
CollectiveCost collective_cost(CollectiveOp op, double bytes, const std::vector<int>& axis_sizes,
                               const HardwareProfile& hw, bool bidirectional = true);

// A ragged (top-k) AllToAll over `group` shards, each holding at most `nonzero` non-zero
// blocks of the `group` it would send (an MoE's dispatch; gpus.md, "AllToAlls"): only
// those travel, min(nonzero / group, 1) of the dense AllToAll's bytes, the hops unchanged
// (Pop Quiz 2: 4 of 8 on an H100 node, half the dense B (N-1) / (W N^2)). UserError unless
// nonzero >= 1 and group >= 1.
CollectiveCost ragged_all_to_all(const CollectiveCost& dense, int nonzero, int group);

// The mesh's per-collective prediction: one axis of group_size ranks over `link`.
double collective_time(CollectiveOp op, double bytes, int group_size, LinkSpec link,
                       bool wraparound, bool bidirectional);

// The message size V at which `latency_seconds` equals `bandwidth_seconds`, both priced
// at V = `bytes`: smaller messages are latency-bound. Every cost here is linear in V with
// hops independent of V, so V* = bytes x latency / bandwidth (for a torus all_gather:
// n x W t, i.e. shards of W t, the book's 45 kB on v5e). 0 when there is no latency term,
// infinite when there is no bandwidth term.
double latency_bound_bytes(double latency_seconds, double bandwidth_seconds, double bytes);

// A point-to-point transfer of `bytes` from one chip to another (the book's TPU question
// "send bf16[8, 128, 8192] from TPU{0,0} to TPU{3,3}"). Torus: the route takes the short
// way round each axis that wraps (|d| or n - |d| hops) and |d| hops on one that does not;
// the source sends over one link per axis it moves along, all at once, and the transfer is
// pipelined through the hops: first byte after hops x t, last after that plus
// bytes / (links x W). Switched: one hop over NVLink within a node, over the NIC between
// nodes (chips numbered row-major over the mesh, node_size to a node).
struct TransferCost {
  double seconds = 0;             // first_byte_seconds + bandwidth_seconds
  double first_byte_seconds = 0;  // hops x per-hop latency
  double bandwidth_seconds = 0;   // bytes / (links x W)
  int hops = 0;
  int links = 0;                  // links the source sends over at once
  std::string path;               // "ici", "nvlink", "infiniband", "none"
};
// `from`, `to`: one coordinate per axis of `axes`. UserError naming a coordinate outside its axis.
TransferCost torus_transfer(double bytes, const std::vector<RingAxis>& axes, const std::vector<int>& from,
                            const std::vector<int>& to, LinkSpec link);
// Dispatch on hw.interconnect, as collective_cost: wraparound as hw.axis_wraps(size).
TransferCost transfer_cost(double bytes, const std::vector<int>& axis_sizes, const std::vector<int>& from,
                           const std::vector<int>& to, const HardwareProfile& hw);

// Bytes/s at which a chip's share of an all_gather flows for large groups: V / T_allgather.
// Torus: 2 W per axis (bidirectional with wraparound, as a full pod); switched: W within a
// node. Across nodes/pods: node_size * W_dcn, since after a reduce_scatter inside the
// domain every chip sends only its 1/node_size share over its own NIC (hierarchical).
// This is the W in the book's compute-bound conditions (e.g. per-chip batch > C / W).
double allgather_bandwidth(const HardwareProfile& hw, int axes = 1, bool across_nodes = false);

}  // namespace shardlab::cost
