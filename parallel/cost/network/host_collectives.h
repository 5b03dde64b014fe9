// All-reduce across commodity hosts (issue 29's two-level collectives; the runtime's
// parallel/comm/two_level.h): h hosts of k ranks each, shared memory between the ranks of
// a host, one network interface per host that its k ranks share.
//
// Flat ring over the n = h k ranks, host-contiguous: 2(n-1) steps of V/n bytes; every
// step crosses a host boundary, where one rank per host sends through the NIC, so
//   T_flat = 2(n-1) (V/(n W_nic) + t_nic).
// Two-level: reduce_scatter inside the host, an all_reduce across hosts of each rank's V/k
// slice (the k rings share the NIC: V/h bytes per step through it), all_gather inside:
//   T_two = 2(k-1) (V/(k W_host) + t_host) + 2(h-1) (V/(h W_nic) + t_nic).
// The NIC's share falls from 2(n-1)/n V/W to 2(h-1)/h V/W, a speed-up of at most
// h(n-1) / (n(h-1)): 1.5x for 2 hosts x 2 ranks, 1.75x for 2 x 4, 1.17x for 4 x 2,
// approached when the host's own links are far faster than its NIC. Two-level also crosses
// the NIC in 2(h-1) steps instead of 2(n-1); where in-host steps are slow (ranks on busy
// cores), small messages are faster flat (two_level_crossover_bytes).
//
//   HostLinks links{.host = {10e9, 1e-6}, .nic = {125e6, 50e-6}};   // shared memory, 1 Gb/s
//   host_all_reduce(64 << 20, 2, 2, links, false).seconds          // flat
//   host_all_reduce(64 << 20, 2, 2, links, true).seconds           // two-level, 1.5x less
#pragma once

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/network/collective.h"

namespace shardlab::cost {

struct HostLinks {
  LinkSpec host;  // between two ranks of one host (shared memory)
  LinkSpec nic;   // out of one host, shared by its ranks
};

// An all_reduce of V = `bytes` over `hosts` x `per_host` ranks, flat or two-level.
CollectiveCost host_all_reduce(double bytes, int hosts, int per_host, const HostLinks& links, bool two_level);

// The smallest V (bytes, a power of two from 4 KiB to 4 GiB) at which two-level is faster
// than flat; 0 if it never is (one host, or one rank per host).
double two_level_crossover_bytes(int hosts, int per_host, const HostLinks& links);

}  // namespace shardlab::cost
