// The two-level all_reduce behind Algorithm::kTwoLevel, for a group whose ranks span
// several hosts with the same number on each (host_topology.h; docs/collectives.md).
//
// As NCCL's and the book's GPU chapter's hierarchical all-reduce, in three phases:
//   1. reduce_scatter inside each host (shared memory): local rank l ends up with the
//      host's sum of slice l of the buffer (L slices of about N/L floats);
//   2. all_reduce of slice l across hosts among the ranks with local index l, as a ring
//      on the inter-host communicator that keeps both directions of each link busy: the
//      L local ranks use the network at once, each for its own disjoint slice, and
//      together send 2(H-1)/H N floats off each host, where a flat ring of the n = H L
//      ranks sends 2(n-1)/n N over each link it crosses between hosts (1.5x as much for
//      2 hosts x 2 ranks, as bench/ethernet_bench.sh measures);
//   3. all_gather inside the host: every rank gets every reduced slice.
// Each sum is taken on one rank (phase 1 in local-rank order, phase 2 on the ring) and then
// copied to the others, so every rank of the group holds the same bits; on
// integer-valued data they are the flat all_reduce's bits.
//
// It runs to completion when called: all_reduce_async with kTwoLevel finishes inside the
// call that starts it (collectives.h). Only all_reduce has a two-level form; the others
// run flat. Reached through collectives.h:
//
//   all_reduce(mesh.axis("data"), grads, ReduceOp::kSum, Algorithm::kTwoLevel);
#pragma once

#include <cstdint>
#include <span>

#include "parallel/comm/collective_types.h"
#include "parallel/comm/host_topology.h"
#include "parallel/comm/schedule.h"

namespace shardlab::parallel {

// The size from which `auto` runs an all_reduce two-level on a group that spans hosts:
// where the flat choice is the ring, which two_level beat by 1.1-1.6x at 16-32 MiB on 2
// hosts x 2 ranks at 1 and 10 Gb/s; below it MPI's own all_reduce tied two_level within
// the noise of the shared cores (0.76-1.25x at 1-8 MiB), so auto keeps the flat choice
// (bench/ethernet_bench.sh, docs/collectives.md).
inline constexpr int64_t kTwoLevelMinBytes = 16 << 20;

// `hosts` must be two-level. Blocking; collective over the group `hosts` describes.
void two_level_all_reduce(const HostTopology& hosts, std::span<float> buffer, ReduceOp op, ScratchPool& scratch);

}  // namespace shardlab::parallel
