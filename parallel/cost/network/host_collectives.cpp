#include "parallel/cost/network/host_collectives.h"

#include "framework/error.h"

namespace shardlab::cost {
namespace {

// `steps` sequential steps of `bytes` each over `link`.
void add_steps(CollectiveCost& c, int steps, double bytes, const LinkSpec& link) {
  c.bandwidth_seconds += steps * bytes / link.bandwidth;
  c.latency_seconds += steps * link.latency;
  c.hops += steps;
}

}  // namespace

CollectiveCost host_all_reduce(double bytes, int hosts, int per_host, const HostLinks& links, bool two_level) {
  if (hosts < 1 || per_host < 1) {
    throw UserError("an all_reduce across hosts needs at least 1 host of 1 rank, got " + std::to_string(hosts) +
                    " x " + std::to_string(per_host));
  }
  CollectiveCost c;
  const int n = hosts * per_host;
  if (!two_level || hosts == 1 || per_host == 1) {
    // One ring; with more than one host its every step waits on a NIC, else on shared memory.
    add_steps(c, 2 * (n - 1), bytes / n, hosts > 1 ? links.nic : links.host);
    c.path = hosts > 1 ? "nic" : "host";
  } else {
    add_steps(c, 2 * (per_host - 1), bytes / per_host, links.host);
    add_steps(c, 2 * (hosts - 1), bytes / hosts, links.nic);  // k concurrent rings of V/k share the NIC
    c.path = "host+nic";
  }
  c.seconds = c.bandwidth_seconds + c.latency_seconds;  // each step pays both: a transfer, then its latency
  c.latency_bound = c.latency_seconds > c.bandwidth_seconds;
  return c;
}

double two_level_crossover_bytes(int hosts, int per_host, const HostLinks& links) {
  if (hosts < 2 || per_host < 2) return 0;
  for (double v = 4096; v <= 4.0 * (1ull << 30); v *= 2) {
    if (host_all_reduce(v, hosts, per_host, links, true).seconds < host_all_reduce(v, hosts, per_host, links, false).seconds) {
      return v;
    }
  }
  return 0;
}

}  // namespace shardlab::cost
