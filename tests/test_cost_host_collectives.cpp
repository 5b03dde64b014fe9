// All-reduce across commodity hosts, flat against two-level (parallel/cost/network/host_collectives.h).
#include <doctest/doctest.h>

#include "framework/error.h"
#include "parallel/cost/network/host_collectives.h"

using namespace shardlab;
using namespace shardlab::cost;

namespace {
// Shared memory in a host (10 GB/s, 1 us) and 1 Gb/s Ethernet (125 MB/s, 50 us).
const HostLinks kEthernet{.host = {10e9, 1e-6}, .nic = {125e6, 50e-6}};
const HostLinks kFastHost{.host = {1e15, 0}, .nic = {125e6, 0}};  // the bandwidth limit alone
}  // namespace

TEST_CASE("flat and two-level all_reduce follow their step counts") {
  const double v = 64.0 * (1 << 20);
  const CollectiveCost flat = host_all_reduce(v, 2, 2, kEthernet, false);
  CHECK(flat.hops == 6);
  CHECK(flat.seconds == doctest::Approx(6 * (v / 4 / 125e6 + 50e-6)));
  const CollectiveCost two = host_all_reduce(v, 2, 2, kEthernet, true);
  CHECK(two.hops == 4);
  CHECK(two.seconds == doctest::Approx(2 * (v / 2 / 10e9 + 1e-6) + 2 * (v / 2 / 125e6 + 50e-6)));
  CHECK(two.path == "host+nic");
}

TEST_CASE("the speed-up tends to h(n-1)/(n(h-1)) when the host is far faster than its NIC") {
  struct Row {
    int hosts, per_host;
    double ceiling;
  };
  for (const Row& r : {Row{2, 2, 1.5}, Row{2, 4, 1.75}, Row{4, 2, 7.0 / 6.0}, Row{8, 8, 8.0 * 63 / (64 * 7)}}) {
    CAPTURE(r.hosts);
    CAPTURE(r.per_host);
    const double v = 1 << 30;
    CHECK(host_all_reduce(v, r.hosts, r.per_host, kFastHost, false).seconds /
              host_all_reduce(v, r.hosts, r.per_host, kFastHost, true).seconds ==
          doctest::Approx(r.ceiling));
    // Real host links take some of it back, never more than all.
    const double real = host_all_reduce(v, r.hosts, r.per_host, kEthernet, false).seconds /
                        host_all_reduce(v, r.hosts, r.per_host, kEthernet, true).seconds;
    CHECK(real < r.ceiling);
    CHECK(real > 1.0);
  }
}

TEST_CASE("two-level pays fewer NIC latencies; slow in-host steps make small messages faster flat") {
  // 2 NIC hops instead of 6: faster at every size when the host's steps are cheap.
  CHECK(two_level_crossover_bytes(2, 2, kEthernet) == 4096);
  // In-host steps of 200 us (ranks sharing busy cores): below the crossover flat wins.
  const HostLinks busy{.host = {10e9, 200e-6}, .nic = kEthernet.nic};
  const double crossover = two_level_crossover_bytes(2, 2, busy);
  REQUIRE(crossover > 4096);
  CHECK(host_all_reduce(crossover / 2, 2, 2, busy, true).seconds >= host_all_reduce(crossover / 2, 2, 2, busy, false).seconds);
  CHECK(host_all_reduce(crossover, 2, 2, busy, true).seconds < host_all_reduce(crossover, 2, 2, busy, false).seconds);
  CHECK(two_level_crossover_bytes(1, 4, kEthernet) == 0);  // one host: nothing to save
  CHECK(two_level_crossover_bytes(4, 1, kEthernet) == 0);  // one rank per host: the same ring
  CHECK(host_all_reduce(1e6, 4, 1, kEthernet, true).seconds == host_all_reduce(1e6, 4, 1, kEthernet, false).seconds);
  CHECK_THROWS_AS(host_all_reduce(1e6, 0, 2, kEthernet, true), UserError);
}
