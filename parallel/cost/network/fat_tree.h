// GPU networks above the NVLink domain (book chapter "gpus", "Beyond the node level" and
// "Cross-node collectives"): the DGX SuperPod fat tree -- nodes of n GPUs on NVLink, 32
// nodes under the leaf InfiniBand switches of a Scalable Unit (SU), SUs under the spine --
// its per-level bandwidth, and collectives whose groups span levels, with an inner
// model-parallel axis and with SHARP in-network reductions.
//
// Level i has degree D_i (children under one switch group) and a link of W_i bytes/s (one
// direction) from each child: node: n GPUs, W = NVLink egress (450 GB/s on H100); leaf: 32
// nodes, W = node egress = n x NIC (8 x 50 GB/s); spine: SUs, W = 32 x node egress (12.8
// TB/s), divided by the spine's oversubscription (1: full bisection). The book's
// collective bandwidth of a level is D_i W_i / (D_i - 1) (514 GB/s, 413 GB/s, 17.1 TB/s on
// H100), the tree's the least of the levels a group spans. An all_gather or reduce_scatter
// of V bytes over a group whose inner axis Y (model parallelism, inner to the node) shards
// the array takes
//   T = V max_i (D_i - 1) / (D_i max(Y, S_i) w_i),  S_i GPUs under one child, w_i = W_i / S_i
// with D_i the group's own degree at level i; an all_reduce twice that, or with SHARP
// (switches reduce) V / min_i(...) without the (D-1)/D factor -- the book's theory: 75%
// faster; it measures ~30%. An all_to_all over M > 1 nodes: V (M - 1) / (M^2 W_node).
//
// Bytes through one switch of each level (the book's Quiz 4 accounting): a switch relays
// every byte entering or leaving the GPUs under it and multicasts to its children, so in
// an all_gather each switch takes in V_i (its children's shards, then the rest from above)
// and sends out D V_i (D - 1 at the group's top level, nothing above it), V_i = V min(1,
// S_i / Y); a SHARP all_reduce D V_i each way (zero for the other collectives: the book
// counts none, and without multicast or in-network reduction a switch forwards each byte).
// The node level's D V_i counts the bytes from the leaf too (the book's B / 450e9 over an
// SU, Q1); the collective's time prices the node's own (D - 1) / D (its B / 514e9, Q5).
//
//   FatTree t = fat_tree(hardware("h100"));
//   GpuCollective c = fat_tree_collective(t, CollectiveOp::kAllGather, 537e6, 256, {.inner = 16});
#pragma once

#include <string>
#include <vector>

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/network/collective.h"

namespace shardlab::cost {

struct FatTreeLevel {
  std::string name;           // "node", "leaf", "spine"
  int degree = 0;             // children per group at this level (the spine: SUs)
  int child_gpus = 0;         // S_i: GPUs under one child
  double link_bandwidth = 0;  // W_i: bytes/s from one child into this level, one direction
  // Switches at this level in the whole tree (gpus.md, "Beyond the node level"): the node's
  // NVSwitches (4 per H100 node); one leaf per GPU rail in each SU (a 64-port switch: 32
  // ports down to the SU's nodes, 32 up); the spine's 64-port switches, all ports down,
  // for the leaves' uplinks (16 over 4 SUs). The 1024-GPU SuperPod: 512 + 32 + 16 = 560.
  int switches = 0;
  double per_gpu() const { return link_bandwidth / child_gpus; }
  // D W / (D - 1): the all_gather bandwidth of a full group at this level.
  double collective_bandwidth() const { return degree * link_bandwidth / (degree - 1); }
  int gpus() const { return degree * child_gpus; }
};

struct FatTree {
  std::vector<FatTreeLevel> levels;  // node first
  double node_egress = 0;            // bytes/s out of one node (the leaf link)
  int switches() const;              // all levels' switches
};

// The DGX SuperPod reference tree for a GPU profile (UserError for a torus): nodes of
// hw.node_size GPUs, 32-node SUs, `sus` SUs under the spine (4: the 1024-GPU SuperPod),
// the spine's uplinks divided by `oversubscription` (>= 1).
FatTree fat_tree(const HardwareProfile& hw, int sus = 4, double oversubscription = 1);

// The reference tree with as many SUs as `gpus` need (full bisection): what the planner's
// axes and `collective` price a group spanning whole nodes on.
FatTree fat_tree_for(const HardwareProfile& hw, int gpus);

struct CollectiveOptions {
  int inner = 1;       // Y: size of an inner axis (GPUs next to each other) the array is sharded over
  bool sharp = false;  // in-network reduction for all_reduce
};

struct LevelTime {
  std::string level;
  int degree = 0;      // the group's degree at this level
  double seconds = 0;
  double switch_in = 0;   // bytes into one switch of this level (see above; all_gather and SHARP)
  double switch_out = 0;  // bytes out of it
  double link_bandwidth = 0;  // W_i: from one child, so the switch's egress is degree x W_i
};

struct GpuCollective {
  double seconds = 0;
  std::string bound_level;         // the level whose time is the largest
  double bandwidth = 0;            // V / seconds (per all_gather pass)
  double bisection_bandwidth = 0;  // both directions across the group's halves: gpus x per-GPU bandwidth
  std::vector<LevelTime> levels;   // the levels the group spans
};

// A collective of V bytes over `gpus` consecutive GPUs (a multiple of the node, or part of
// one). UserError when the group is not whole nodes or does not fit the tree, or when the
// inner axis does not divide it.
GpuCollective fat_tree_collective(const FatTree& tree, CollectiveOp op, double bytes, int gpus,
                                  const CollectiveOptions& options = {});

// The collective of one mesh axis of `size` GPUs, `inner` GPUs of axes nested inside it
// between neighbours, on the reference tree (full bisection, as many SUs as the
// size x inner GPUs need): fat_tree_collective of the whole array, bytes x inner, over
// size x inner GPUs with that inner axis. Latency: one NVLink hop per ring step inside a
// node, one NIC hop per node. What gpu_collective and the planner (axis_collective) use
// wherever a group spans whole nodes (and whole SUs past one); false from
// spans_whole_nodes otherwise (part of a node, nodes or SUs shared with other groups, or
// an all_to_all with an inner axis).
bool spans_whole_nodes(CollectiveOp op, int size, int inner, const HardwareProfile& hw);
CollectiveCost fat_tree_axis_collective(CollectiveOp op, double bytes, int size, int inner, const HardwareProfile& hw);

}  // namespace shardlab::cost
