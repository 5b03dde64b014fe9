// Two-level all_reduce (parallel/comm/two_level.h) equals MPI's flat MPI_Allreduce bit for
// bit on integer-valued data, at odd sizes, with the job's ranks grouped into made-up
// hosts (HostTopologies with a host per rank chosen here): 2 x 2 at 4 ranks; 3 x 2 and
// 2 x 3 at 6. Groups that do not span hosts evenly run flat. The real hosts (network namespaces) are tests/multihost_two_level.sh's.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "parallel/comm/algorithm_table.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/two_level.h"
#include "tests/mpi_test_util.h"

using namespace shardlab;
using namespace shardlab::parallel;
using shardlab::testing::world_size;

namespace {

std::vector<float> pattern(int64_t n, int rank) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((rank * 7 + i * 3) % 19 - 9);
  return v;
}

// `algorithm`'s all_reduce of each rank's pattern against MPI_Allreduce on the group's comm.
void check_against_flat(const AxisGroup& g, Algorithm algorithm, ReduceOp op) {
  for (int64_t n : {0, 1, 3, 5, 17, 1001, 65537, 1500001}) {
    CAPTURE(n);
    std::vector<float> flat = pattern(n, g.rank()), two = flat;
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(n), MPI_FLOAT, op == ReduceOp::kSum ? MPI_SUM : MPI_MAX,
                  g.comm());
    all_reduce(g, two, op, algorithm);
    CHECK(two == flat);
  }
}

}  // namespace

TEST_CASE("on made-up hosts of 2 or 3 ranks, two-level all_reduce is MPI's flat result bit for bit") {
  const int n = world_size();
  for (int per_host : {2, 3}) {
    if (n % per_host != 0 || n == per_host) continue;
    CAPTURE(per_host);
    Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(n));
    mesh.context().hosts = HostTopologies(mesh, mesh.rank() / per_host);
    const AxisGroup& g = mesh.axis("data");
    const HostTopology& t = mesh.context().hosts.of(g);
    REQUIRE(t.two_level());
    CHECK(t.describe() == std::to_string(n / per_host) + " hosts x " + std::to_string(per_host) + " ranks");
    CHECK(t.hosts() == n / per_host);
    CHECK(t.ranks_per_host() == per_host);
    check_against_flat(g, Algorithm::kTwoLevel, ReduceOp::kSum);
    check_against_flat(g, Algorithm::kTwoLevel, ReduceOp::kMax);
    // The async form finishes before it returns.
    std::vector<float> v = pattern(999, g.rank()), flat = v;
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), 999, MPI_FLOAT, MPI_SUM, g.comm());
    CollectiveHandle h = all_reduce_async(g, v, ReduceOp::kSum, Algorithm::kTwoLevel);
    CHECK(h.test());
    CHECK(v == flat);
  }
}

TEST_CASE("auto picks two-level for large all_reduces across hosts only, and the trace says so") {
  if (world_size() != 4) return;
  Mesh mesh(MPI_COMM_WORLD, "data=4");
  const AxisGroup& g = mesh.axis("data");
  CHECK(resolve_algorithm(g, CollectiveOp::kAllReduce, 1 << 20, Algorithm::kAuto) != Algorithm::kTwoLevel);
  mesh.context().hosts = HostTopologies(mesh, mesh.rank() / 2);
  CHECK(resolve_algorithm(g, CollectiveOp::kAllReduce, kTwoLevelMinBytes, Algorithm::kAuto) == Algorithm::kTwoLevel);
  CHECK(resolve_algorithm(g, CollectiveOp::kAllReduce, kTwoLevelMinBytes - 4, Algorithm::kAuto) != Algorithm::kTwoLevel);
  CHECK(resolve_algorithm(g, CollectiveOp::kReduceScatter, 1 << 20, Algorithm::kAuto) != Algorithm::kTwoLevel);
  CHECK(resolve_algorithm(g, CollectiveOp::kAllGather, 1 << 20, Algorithm::kTwoLevel) == Algorithm::kNative);
  check_against_flat(g, Algorithm::kAuto, ReduceOp::kSum);
  mesh.context().trace.set_recording(true);
  std::vector<float> v(kTwoLevelMinBytes / sizeof(float), 1.0f);
  all_reduce(g, v);
  REQUIRE(mesh.context().trace.events().size() == 1);
  CHECK(mesh.context().trace.events().front().algorithm == Algorithm::kTwoLevel);
  CHECK(mesh.context().trace.events().front().bytes == kTwoLevelMinBytes);
  CHECK(v == std::vector<float>(v.size(), 4.0f));
}

// MPI's nonblocking all_reduce is slow across hosts over TCP and on shared memory, so an
// async all_reduce that auto gives to MPI runs the ring from 1 MiB (collectives.h).
TEST_CASE("an async all_reduce that auto gives to MPI runs the ring from 1 MiB, on one host and across hosts") {
  if (world_size() != 4) return;
  Mesh mesh(MPI_COMM_WORLD, "data=4");
  const AxisGroup& g = mesh.axis("data");
  mesh.context().auto_table = AlgorithmTable({{CollectiveOp::kAllReduce, AlgorithmTable::kAnySize,
                                               AlgorithmTable::kAnySize, Algorithm::kNative}});
  CHECK(async_all_reduce_algorithm(g, kAsyncRingMinBytes, Algorithm::kAuto) == Algorithm::kRing);  // one host
  CHECK(async_all_reduce_algorithm(g, kAsyncRingMinBytes - 4, Algorithm::kAuto) == Algorithm::kAuto);
  mesh.context().hosts = HostTopologies(mesh, mesh.rank() / 2);
  CHECK(async_all_reduce_algorithm(g, kAsyncRingMinBytes, Algorithm::kAuto) == Algorithm::kRing);
  CHECK(async_all_reduce_algorithm(g, kAsyncRingMinBytes - 4, Algorithm::kAuto) == Algorithm::kAuto);
  CHECK(async_all_reduce_algorithm(g, kAsyncRingMinBytes, Algorithm::kNative) == Algorithm::kNative);  // asked for
  CHECK(async_all_reduce_algorithm(g, kTwoLevelMinBytes, Algorithm::kAuto) == Algorithm::kTwoLevel);
  mesh.context().trace.set_recording(true);
  std::vector<float> v = pattern(kAsyncRingMinBytes / sizeof(float), g.rank()), flat = v;
  MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()), MPI_FLOAT, MPI_SUM, g.comm());
  all_reduce_async(g, v).wait();
  CHECK(v == flat);
  REQUIRE(mesh.context().trace.events().size() == 1);
  CHECK(mesh.context().trace.events().front().algorithm == Algorithm::kRing);
}

TEST_CASE("each group of a 2D mesh spans the made-up hosts as its ranks do") {
  if (world_size() != 4) return;
  Mesh mesh(MPI_COMM_WORLD, "data=2,tensor=2");  // tensor innermost: one host per data coordinate
  mesh.context().hosts = HostTopologies(mesh, mesh.rank() / 2);
  const HostTopologies& hosts = mesh.context().hosts;
  CHECK(hosts.of(mesh.axis("tensor")).describe() == "flat: 1 host");
  CHECK(hosts.of(mesh.axis("data")).describe() == "flat: 2 hosts x 1 rank");
  CHECK(hosts.of(mesh.all()).describe() == "2 hosts x 2 ranks");
  check_against_flat(mesh.all(), Algorithm::kTwoLevel, ReduceOp::kSum);
  check_against_flat(mesh.axis("data"), Algorithm::kTwoLevel, ReduceOp::kSum);  // runs native
}

TEST_CASE("uneven hosts fall back to flat, and say why") {
  if (world_size() != 4) return;
  Mesh mesh(MPI_COMM_WORLD, "data=4");
  const AxisGroup& g = mesh.axis("data");
  mesh.context().hosts = HostTopologies(mesh, mesh.rank() == 3 ? 1 : 0);
  const HostTopology& t = mesh.context().hosts.of(g);
  CHECK_FALSE(t.two_level());
  CHECK(t.describe() == "flat: hosts hold 3, 1 ranks");
  CHECK(resolve_algorithm(g, CollectiveOp::kAllReduce, 1 << 20, Algorithm::kTwoLevel) == Algorithm::kNative);
  check_against_flat(g, Algorithm::kTwoLevel, ReduceOp::kSum);
}

// On the hosts MPI finds (one machine under CTest; two network namespaces of 2 ranks each
// under tests/multihost_two_level.sh, which checks the line printed here).
TEST_CASE("on the hosts MPI finds, two-level all_reduce equals flat") {
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(world_size()));
  const AxisGroup& g = mesh.axis("data");
  if (g.rank() == 0) std::printf("hosts of axis data: %s\n", mesh.context().hosts.of(g).describe().c_str());
  check_against_flat(g, Algorithm::kTwoLevel, ReduceOp::kSum);
  check_against_flat(g, Algorithm::kAuto, ReduceOp::kSum);
}
