// Multi-pod training on TPUs (book chapter "training", "Scaling Across Pods"): pods of
// hw.node_size chips, each a torus on ICI, joined by the data-center network (DCN), over
// which each chip has its own share hw.dcn.bandwidth (v5p: a host's 25 GB/s over its 4
// chips = 6.25 GB/s).
//
// A mesh axis of `size` chips with `inner` chips on the axes nested inside it lies in one
// pod while inner x size <= node_size; an axis whose inner axes fill whole pods runs
// entirely over DCN; one in between straddles the pod boundary and is priced
// hierarchically: ICI within each pod's share of the group, DCN across pods on that
// share's part of the bytes (like GPU groups that do not fill whole nodes, network/collective.h).
//
// The book's condition for pure data parallelism across pods: the gradient all_reduce
// T_comms = 8DF / (M W_dcn) (M chips per pod, each on its own NIC share) hides under the
// backward pass T_math = 8BDF / (N C) iff the batch per pod B / (N/M) > C / W_dcn
// (dcn_critical_batch_per_pod: 73,440 tokens on v5p).
//
//   int pods = pods_spanned(35840, hardware("tpu-v5p"));                  // 4
//   PodSplit s = pod_split(4, 8960, hardware("tpu-v5p"));                 // {1, 4}: all DCN
//   CollectiveCost c = torus_axis_collective(CollectiveOp::kAllReduce, 1e9, 4, 8960, 35840, v5p);
#pragma once

#include "parallel/cost/network/collective.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {

// Pods a slice of `chips` spans: ceil(chips / node_size) on a torus; 1 on a switched
// (GPU) network, whose nodes the fat tree prices (network/fat_tree.h).
int pods_spanned(int chips, const HardwareProfile& hw);

// Where the chips of one mesh axis group lie: in_pod x across_pods = size. in_pod is the
// largest divisor of size that fits in a pod beside the `inner` chips (node_size / inner),
// so across_pods is 1 for a group inside one pod and size once inner fills whole pods.
// Switched networks: always {size, 1}.
struct PodSplit {
  int in_pod = 1;
  int across_pods = 1;
};
PodSplit pod_split(int size, int inner, const HardwareProfile& hw);

// The book's M of a group of `size` chips inside one pod of a `chips`-chip slice: how many
// physical torus axes it spans, round(log size / log side) within [1, torus_axes], where
// side = min(chips, node_size)^(1 / torus_axes). 1 on switched networks.
int torus_axes_spanned(int size, int chips, const HardwareProfile& hw);

// A torus mesh axis's collective (the torus branch of axis_collective, training/train_step.h): on
// ICI over torus_axes_spanned() axes, wraparound only where the ring covers a whole side;
// over DCN (path "dcn", a ring on each chip's share) once inner fills pods; hierarchical
// (path "ici+dcn": ICI on in_pod chips plus DCN on across_pods rings of bytes / in_pod)
// when the group straddles pods.
CollectiveCost torus_axis_collective(CollectiveOp op, double bytes, int size, int inner, int chips,
                                     const HardwareProfile& hw);

// Tokens per pod above which pure data parallelism across pods hides its DCN gradient
// all_reduce under the backward pass: C / W_dcn with both per chip.
double dcn_critical_batch_per_pod(const HardwareProfile& hw, DType compute = DType::kBf16);

}  // namespace shardlab::cost
