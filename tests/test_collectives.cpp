// Every collective x algorithm x 1D/2D/3D mesh x wraparound on/off equals MPI's native
// result exactly. Data are small integers stored as floats, so every summation order
// gives the same bits. Runs at -n 1, 2, 4 and 8.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "framework/error.h"
#include "parallel/comm/algorithm_table.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/mesh.h"
#include "tests/mpi_test_util.h"

using namespace shardlab;
using namespace shardlab::parallel;
using shardlab::testing::world_size;

namespace {

// Mesh specs with 1, 2 and 3 axes for the job's size.
std::vector<std::string> mesh_specs() {
  const int n = world_size();
  std::vector<std::string> specs = {"data=" + std::to_string(n)};
  for (int t = 1; t <= n; t *= 2) specs.push_back("data=" + std::to_string(n / t) + ",tensor=" + std::to_string(t));
  if (n >= 4) specs.push_back("data=2,pipe=" + std::to_string(n / 4) + ",tensor=2");
  if (n == 8) specs.push_back("data=2,pipe=2,expert=1,tensor=2");
  return specs;
}

// Every non-empty set of the mesh's axes.
std::vector<std::vector<std::string>> axis_sets(const std::vector<AxisSpec>& axes) {
  std::vector<std::vector<std::string>> sets;
  for (unsigned mask = 1; mask < (1u << axes.size()); ++mask) {
    std::vector<std::string> names;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (mask >> i & 1) names.push_back(axes[i].name);
    }
    sets.push_back(names);
  }
  return sets;
}

std::vector<float> pattern(int64_t n, int rank, int salt) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((rank * 7 + i * 3 + salt) % 19 - 9);
  return v;
}

const Algorithm kNeighbourAlgorithms[] = {Algorithm::kRing, Algorithm::kBidir, Algorithm::kAuto};

template <typename Body>
void for_each_group(Body body) {
  for (const std::string& spec : mesh_specs()) {
    for (Topology topology : {Topology::kTorus, Topology::kMesh}) {
      Mesh mesh(MPI_COMM_WORLD, spec, topology);
      for (const auto& names : axis_sets(parse_mesh_spec(spec))) {
        const AxisGroup& g = mesh.group(names);
        for (Algorithm a : kNeighbourAlgorithms) {
          CAPTURE(mesh.describe());
          CAPTURE(g.name());
          CAPTURE(to_string(a));
          body(g, a);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("all_gather, reduce_scatter and all_to_all match native on every group") {
  for_each_group([](const AxisGroup& g, Algorithm a) {
    const int n = g.size();
    for (int64_t m : {1, 5, 12}) {
      std::vector<float> in = pattern(m, g.rank(), 1), expect(m * n), got(m * n);
      all_gather(g, in, expect, Algorithm::kNative);
      all_gather(g, in, got, a);
      CHECK(got == expect);

      std::vector<float> full = pattern(m * n, g.rank(), 2), rs_expect(m), rs_got(m);
      reduce_scatter(g, full, rs_expect, Algorithm::kNative);
      reduce_scatter(g, full, rs_got, a);
      CHECK(rs_got == rs_expect);

      std::vector<float> a2a_expect(m * n), a2a_got(m * n);
      all_to_all(g, full, a2a_expect, Algorithm::kNative);
      all_to_all(g, full, a2a_got, a);
      CHECK(a2a_got == a2a_expect);
    }
  });
}

TEST_CASE("all_reduce sum and max match native for any size") {
  for_each_group([](const AxisGroup& g, Algorithm a) {
    for (int64_t count : {int64_t{1}, int64_t{g.size()} + 3, int64_t{37}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        std::vector<float> expect = pattern(count, g.rank(), 3), got = expect;
        all_reduce(g, expect, op, Algorithm::kNative);
        all_reduce(g, got, op, a);
        CHECK(got == expect);
      }
    }
  });
}

// A bf16 wire (--reduce-dtype bf16): messages travel as bf16, sums are taken in fp32. On
// small integers every partial sum is a value bf16 holds exactly (|sum| <= 9 x 8 < 256),
// so the result is native's, bit for bit. On general floats every rank must end with the
// same all_reduce result, a bf16 value, within the rounding of the hops: each of the at
// most n - 1 forwarded partial sums and the final one moves by 2^-8 of its magnitude, so
// |got - exact| <= n 2^-8 sum_ranks |x|.
TEST_CASE("reductions on a bf16 wire: exact where bf16 holds the sums, identical on every rank") {
  for_each_group([](const AxisGroup& g, Algorithm a) {
    const int n = g.size();
    for (int64_t m : {1, 5, 12}) {
      std::vector<float> full = pattern(m * n, g.rank(), 2), expect(m), got(m);
      reduce_scatter(g, full, expect, Algorithm::kNative);
      reduce_scatter(g, full, got, a, DType::kBF16);
      CHECK(got == expect);
    }
    std::vector<float> expect = pattern(37, g.rank(), 3), got = expect;
    all_reduce(g, expect, ReduceOp::kSum, Algorithm::kNative);
    all_reduce(g, got, ReduceOp::kSum, a, DType::kBF16);
    CHECK(got == expect);

    std::vector<float> x(41), exact(41), magnitude(41);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(g.rank() + 1) + 0.011f * static_cast<float>(i) - 0.2f;
    for (size_t i = 0; i < x.size(); ++i) magnitude[i] = std::abs(x[i]);
    exact = x;
    all_reduce(g, exact, ReduceOp::kSum, Algorithm::kNative);
    all_reduce(g, magnitude, ReduceOp::kSum, Algorithm::kNative);
    std::vector<float> mine = x, lowest, highest;
    all_reduce(g, mine, ReduceOp::kSum, a, DType::kBF16);
    lowest = mine;
    highest = mine;
    for (float& v : lowest) v = -v;
    all_reduce(g, lowest, ReduceOp::kMax, Algorithm::kNative);
    all_reduce(g, highest, ReduceOp::kMax, Algorithm::kNative);
    for (size_t i = 0; i < x.size(); ++i) {
      CHECK(-lowest[i] == highest[i]);  // every rank holds the same value
      if (n > 1) CHECK(round_bf16(mine[i]) == mine[i]);  // a size-1 group leaves the buffer as it is
      CHECK(std::abs(mine[i] - exact[i]) <= n / 256.0 * magnitude[i]);
    }
  });
}

TEST_CASE("reduce_scatter and all_reduce sent in parts match native") {
  // 65536-float parts (ring_algorithms.cpp), 4 in flight per recv (schedule.cpp): chunks
  // of 9.5 parts reuse every window slot (bidir's half chunks too) and end in a partial one.
  const int n = world_size();
  const int64_t m = 622592;
  for (Topology topology : {Topology::kTorus, Topology::kMesh}) {
    Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(n), topology);
    const AxisGroup& g = mesh.axis("data");
    for (Algorithm a : {Algorithm::kRing, Algorithm::kBidir}) {
      CAPTURE(mesh.describe());
      CAPTURE(to_string(a));
      std::vector<float> full = pattern(m * n, g.rank(), 5), expect(m), got(m, -1.0f);
      reduce_scatter(g, full, expect, Algorithm::kNative);
      reduce_scatter_async(g, full, got, a).wait();
      CHECK(got == expect);
      std::fill(got.begin(), got.end(), -1.0f);
      CollectiveHandle polled = reduce_scatter_async(g, full, got, a);
      while (!polled.test()) {
      }
      CHECK(got == expect);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        std::vector<float> ar_expect = pattern(m * n + 1, g.rank(), 6), ar_got = ar_expect;
        all_reduce(g, ar_expect, op, Algorithm::kNative);
        all_reduce(g, ar_got, op, a);
        CHECK(ar_got == ar_expect);
      }
    }
  }
}

TEST_CASE("auto follows the table's rule for the group size and message size") {
  const AlgorithmTable table({{CollectiveOp::kReduceScatter, 2, AlgorithmTable::kAnySize, Algorithm::kRing},
                              {CollectiveOp::kReduceScatter, 8, 65536, Algorithm::kNative},
                              {CollectiveOp::kReduceScatter, 8, AlgorithmTable::kAnySize, Algorithm::kBidir}});
  CHECK(table.choose(CollectiveOp::kReduceScatter, 2, 4096) == Algorithm::kRing);
  CHECK(table.choose(CollectiveOp::kReduceScatter, 4, 4096) == Algorithm::kNative);
  CHECK(table.choose(CollectiveOp::kReduceScatter, 8, 1 << 20) == Algorithm::kBidir);
  CHECK(table.choose(CollectiveOp::kReduceScatter, 16, 1 << 20) == Algorithm::kNative);  // nobody calibrated 16
  CHECK(table.choose(CollectiveOp::kAllGather, 2, 1 << 20) == Algorithm::kNative);
}

TEST_CASE("calibrated rules need a 10% lead at two adjacent sizes to leave native") {
  using enum CollectiveOp;
  std::vector<Measurement> t;
  const auto time = [&](CollectiveOp op, int64_t bytes, double native, double ring) {
    t.push_back({op, bytes, Algorithm::kNative, native});
    t.push_back({op, bytes, Algorithm::kRing, ring});
  };
  // reduce_scatter: ring wins clearly from 64 KiB on; at 16 KiB it wins once, alone (noise).
  time(kReduceScatter, 4096, 1.0, 1.5);
  time(kReduceScatter, 16384, 1.0, 0.8);
  time(kReduceScatter, 32768, 1.0, 1.0);
  time(kReduceScatter, 65536, 1.0, 0.5);
  time(kReduceScatter, 131072, 1.0, 0.4);
  // all_gather: ring always 5% ahead, inside the noise.
  time(kAllGather, 4096, 1.0, 0.95);
  time(kAllGather, 8192, 1.0, 0.95);
  // all_reduce: ring and bidir take turns, both far ahead of native: each keeps its size.
  time(kAllReduce, 4096, 1.0, 0.5);
  t.push_back({kAllReduce, 8192, Algorithm::kNative, 1.0});
  t.push_back({kAllReduce, 8192, Algorithm::kBidir, 0.4});
  const std::vector<AutoRule> rules = AlgorithmTable::rules_from(t, 2);
  const AlgorithmTable table(rules);
  CHECK(table.choose(kReduceScatter, 2, 16384) == Algorithm::kNative);
  CHECK(table.choose(kReduceScatter, 2, 32768) == Algorithm::kNative);
  CHECK(table.choose(kReduceScatter, 2, 65536) == Algorithm::kRing);
  CHECK(table.choose(kReduceScatter, 2, 1 << 30) == Algorithm::kRing);  // the last rule covers any larger size
  CHECK(table.choose(kAllGather, 2, 8192) == Algorithm::kNative);
  CHECK(table.choose(kAllReduce, 2, 4096) == Algorithm::kRing);
  CHECK(table.choose(kAllReduce, 2, 8192) == Algorithm::kBidir);
  // all_gather native; reduce_scatter native up to 32 KiB, ring beyond; all_reduce ring, bidir
  CHECK(rules.size() == 5);
}

TEST_CASE("the native reference is itself right: all_reduce of the rank sums 0..n-1") {
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(world_size()));
  std::vector<float> v(3, static_cast<float>(mesh.rank()));
  all_reduce(mesh.axis("data"), v, ReduceOp::kSum, Algorithm::kBidir);
  const float n = static_cast<float>(mesh.size());
  CHECK(v == std::vector<float>(3, n * (n - 1) / 2));
}

TEST_CASE("ppermute shifts along one axis like native, for every shift") {
  for (const std::string& spec : mesh_specs()) {
    for (Topology topology : {Topology::kTorus, Topology::kMesh}) {
      Mesh mesh(MPI_COMM_WORLD, spec, topology);
      for (const AxisSpec& axis : parse_mesh_spec(spec)) {
        const AxisGroup& g = mesh.axis(axis.name);
        for (int shift = -axis.size; shift <= axis.size + 1; ++shift) {
          for (Algorithm a : kNeighbourAlgorithms) {
            CAPTURE(mesh.describe());
            CAPTURE(axis.name);
            CAPTURE(shift);
            std::vector<float> in = pattern(6, g.rank(), 4), expect(6), got(6);
            ppermute(g, in, expect, shift, Algorithm::kNative);
            ppermute(g, in, got, shift, a);
            CHECK(got == expect);
            CHECK(expect == pattern(6, g.single_axis().shifted(-shift), 4));
          }
        }
      }
    }
  }
}

TEST_CASE("send and recv reach the neighbour on an axis") {
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(world_size()), Topology::kMesh);
  const AxisGroup& axis = mesh.axis("data");
  const int c = mesh.coord("data"), n = mesh.axis_size("data");
  std::vector<float> mine = pattern(4, c, 5), got(4);
  // A pipeline's forward pass: receive from the previous stage, send to the next.
  CollectiveHandle incoming = c > 0 ? recv_async(axis, got, c - 1) : CollectiveHandle();
  if (c + 1 < n) send(axis, mine, c + 1);
  incoming.wait();
  if (c > 0) CHECK(got == pattern(4, c - 1, 5));
  if (n > 1) CHECK_THROWS_AS(send(axis, mine, c), UserError);
}

TEST_CASE("async forms complete, and overlap with work done between test() calls") {
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(world_size()));
  const AxisGroup& g = mesh.axis("data");
  const int n = g.size();
  std::vector<float> in = pattern(8, g.rank(), 6), gathered(8 * n), expect(8 * n);
  all_gather(g, in, expect, Algorithm::kNative);
  for (Algorithm a : {Algorithm::kNative, Algorithm::kRing, Algorithm::kBidir}) {
    CollectiveHandle h = all_gather_async(g, in, gathered, a);
    h.wait();
    CHECK(gathered == expect);
  }
  if (n == 1) return;

  // Delay mode turns the link time into waiting that work can hide: with the wire busy
  // for T and work of T between test() calls, the whole takes about T, not 2T.
  const cost::LinkSpec slow{1e9, 0.01};  // 10 ms per hop, bytes negligible, far above scheduling noise
  mesh.context().links.configure(LinkMode::kDelay, cost::hardware("tpu-v5e"), 1.0);
  mesh.context().links.set_axis_link(0, slow);
  std::vector<float> buffer = pattern(64, g.rank(), 7), reference = buffer;
  all_reduce(g, reference, ReduceOp::kSum, Algorithm::kNative);
  MPI_Barrier(MPI_COMM_WORLD);
  const double comm_alone = [&] {
    std::vector<float> b = buffer;
    auto t0 = std::chrono::steady_clock::now();
    all_reduce(g, b, ReduceOp::kSum, Algorithm::kRing);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }();
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = std::chrono::steady_clock::now();
  CollectiveHandle h = all_reduce_async(g, buffer, ReduceOp::kSum, Algorithm::kRing);
  int slices = 0;
  const auto work_end = t0 + std::chrono::duration<double>(comm_alone);
  while (std::chrono::steady_clock::now() < work_end) {  // "compute", polling between ops
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    h.test();
    ++slices;
  }
  h.wait();
  const double both = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(buffer == reference);
  CHECK(slices > 0);
  CHECK(both < 1.6 * comm_alone);
}

TEST_CASE("sizes that do not divide the group are rejected on every rank") {
  const int n = world_size();
  if (n == 1) return;
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(n));
  const AxisGroup& g = mesh.axis("data");
  std::vector<float> in(n + 1), out(1);
  CHECK_THROWS_WITH_AS(reduce_scatter(g, in, out, Algorithm::kRing), doctest::Contains("pad the input"), UserError);
  std::vector<float> a2a_in(n + 1), a2a_out(n + 1);
  CHECK_THROWS_AS(all_to_all(g, a2a_in, a2a_out), UserError);
  std::vector<float> overlap(2 * n);
  CHECK_THROWS_WITH_AS(all_gather(g, std::span<const float>(overlap).first(2), overlap), doctest::Contains("overlaps"),
                       UserError);
}

TEST_CASE("size-1 axes cost nothing and record nothing") {
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(world_size()) + ",tensor=1");
  std::vector<float> v = {1, 2, 3}, out(3);
  all_reduce(mesh.axis("tensor"), v, ReduceOp::kSum, Algorithm::kRing);
  all_gather(mesh.axis("tensor"), v, out, Algorithm::kBidir);
  CHECK(v == std::vector<float>{1, 2, 3});
  CHECK(out == v);
  CHECK(mesh.context().trace.totals().empty());
}
