// Collectives on compressed wires (--reduce-dtype / --gather-dtype int8, bf16): against
// MPI's own fp32 result, exactly where the wire holds the values and within the derived
// error bound where it does not, identical on every rank, and with error feedback whose
// drift over many steps stays bounded. Runs at -n 2, 3, 4 and 8.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/mesh.h"
#include "tests/mpi_test_util.h"

using namespace shardlab;
using namespace shardlab::parallel;
using shardlab::testing::world_size;

namespace {

// One axis of every rank, and for an even count of 4 or more two axes of which the test
// takes each and both.
struct Case {
  std::string spec;
  std::vector<std::vector<std::string>> groups;
};

std::vector<Case> cases() {
  const int n = world_size();
  std::vector<Case> c = {{"data=" + std::to_string(n), {{"data"}}}};
  if (n >= 4 && n % 2 == 0) c.push_back({"data=2,tensor=" + std::to_string(n / 2), {{"data"}, {"tensor"}, {"data", "tensor"}}});
  return c;
}

template <typename Body>
void for_each_group(Body body) {
  for (const Case& c : cases()) {
    for (Topology topology : {Topology::kTorus, Topology::kMesh}) {
      Mesh mesh(MPI_COMM_WORLD, c.spec, topology);
      for (const auto& names : c.groups) {
        const AxisGroup& g = mesh.group(names);
        for (Algorithm a : {Algorithm::kRing, Algorithm::kBidir, Algorithm::kAuto}) {
          CAPTURE(mesh.describe());
          CAPTURE(g.name());
          CAPTURE(to_string(a));
          body(mesh, g, a);
        }
      }
    }
  }
}

std::vector<float> integers(int64_t n, int rank, int salt) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((rank * 7 + i * 3 + salt) % 19 - 9);
  return v;
}

// General floats, different on every rank, of magnitude up to about 2.
std::vector<float> reals(int64_t n, int rank) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = 0.37f * static_cast<float>(rank + 1) + 0.0113f * static_cast<float>(i % 101) - std::sin(0.7f * static_cast<float>(i));
  }
  return v;
}

// The largest value of x over the whole group (every rank).
float group_max(const AxisGroup& g, float x) {
  std::vector<float> v = {x};
  all_reduce(g, v, ReduceOp::kMax, Algorithm::kNative);
  return v[0];
}

// Whether every rank of the group holds the same values.
bool identical_on_group(const AxisGroup& g, const std::vector<float>& x) {
  std::vector<float> high = x, low = x;
  for (float& v : low) v = -v;
  all_reduce(g, high, ReduceOp::kMax, Algorithm::kNative);
  all_reduce(g, low, ReduceOp::kMax, Algorithm::kNative);
  for (size_t i = 0; i < x.size(); ++i) {
    if (high[i] != x[i] || -low[i] != x[i]) return false;
  }
  return true;
}

// The error a compressed reduction may make, derived in docs/collectives.md: every
// encoding moves a value by at most 1/127.5 of its block's largest magnitude, which is at
// most M = max_i sum_ranks |x_i|; a reduce_scatter encodes (n_a - 1) partial sums per
// axis of size n_a, an all_reduce also rounds the reduced chunk (n_a encodings), plus
// fp32's own rounding (5% slack covers it and the growth of later axes' inputs).
double int8_bound(const AxisGroup& g, CollectiveOp op, float m) {
  double encodings = 0;
  for (const Axis* axis : g.axes()) {
    if (axis->size > 1) encodings += op == CollectiveOp::kAllReduce ? axis->size : axis->size - 1;
  }
  return 1.05 * encodings * m / 127.5;
}

float sum_of_magnitudes_max(const AxisGroup& g, const std::vector<float>& x) {
  std::vector<float> magnitude(x.size());
  for (size_t i = 0; i < x.size(); ++i) magnitude[i] = std::abs(x[i]);
  all_reduce(g, magnitude, ReduceOp::kSum, Algorithm::kNative);
  return group_max(g, *std::max_element(magnitude.begin(), magnitude.end()));
}

}  // namespace

// Small integers with sums of at most 9 x 8 = 72 < 127: every block's scale is at most 1,
// so int8 holds every value and every partial sum exactly -- MPI's result bit for bit,
// also in parts (70003 floats a chunk: parts of 65536, a partial block at the end).
TEST_CASE("int8 wire: equal to native on small integers, any size, in parts too") {
  for_each_group([](Mesh&, const AxisGroup& g, Algorithm a) {
    const int n = g.size();
    for (int64_t m : {1, 5, 300, 70003}) {
      CAPTURE(m);
      std::vector<float> full = integers(m * n, g.rank(), 2), expect(m), got(m);
      reduce_scatter(g, full, expect, Algorithm::kNative);
      reduce_scatter(g, full, got, a, DType::kInt8);
      CHECK(got == expect);

      std::vector<float> ar_expect = integers(m * n + 3, g.rank(), 3), ar_got = ar_expect;
      all_reduce(g, ar_expect, ReduceOp::kSum, Algorithm::kNative);
      all_reduce(g, ar_got, ReduceOp::kSum, a, DType::kInt8);
      CHECK(ar_got == ar_expect);

      std::vector<float> in = integers(m, g.rank(), 4), ag_expect(m * n), ag_got(m * n);
      all_gather(g, in, ag_expect, Algorithm::kNative);
      all_gather(g, in, ag_got, a, DType::kInt8);
      CHECK(ag_got == ag_expect);
    }
    std::vector<float> mx_expect = integers(37, g.rank(), 5), mx_got = mx_expect;
    all_reduce(g, mx_expect, ReduceOp::kMax, Algorithm::kNative);
    all_reduce(g, mx_got, ReduceOp::kMax, a, DType::kInt8);
    CHECK(mx_got == mx_expect);
  });
}

TEST_CASE("int8 wire on general floats: within the derived bound of native fp32, identical on every rank") {
  for_each_group([](Mesh&, const AxisGroup& g, Algorithm a) {
    const int n = g.size();
    for (int64_t m : {7, 300, 1025}) {
      CAPTURE(m);
      std::vector<float> full = reals(m * n, g.rank()), expect(m), got(m);
      reduce_scatter(g, full, expect, Algorithm::kNative);
      reduce_scatter(g, full, got, a, DType::kInt8);
      const double rs_bound = int8_bound(g, CollectiveOp::kReduceScatter, sum_of_magnitudes_max(g, full));
      for (int64_t i = 0; i < m; ++i) CHECK(std::abs(got[i] - expect[i]) <= rs_bound);

      std::vector<float> ar_expect = reals(m * n + 1, g.rank()), ar_got = ar_expect;
      const double ar_bound = int8_bound(g, CollectiveOp::kAllReduce, sum_of_magnitudes_max(g, ar_expect));
      all_reduce(g, ar_expect, ReduceOp::kSum, Algorithm::kNative);
      all_reduce(g, ar_got, ReduceOp::kSum, a, DType::kInt8);
      for (size_t i = 0; i < ar_got.size(); ++i) CHECK(std::abs(ar_got[i] - ar_expect[i]) <= ar_bound);
      CHECK(identical_on_group(g, ar_got));
      CHECK(ar_got != ar_expect);  // it did round: the test sees a wire that silently sends fp32

      // A gather rounds each rank's chunk once per axis it crosses.
      std::vector<float> in = reals(m, g.rank()), ag_expect(m * n), ag_got(m * n);
      all_gather(g, in, ag_expect, Algorithm::kNative);
      all_gather(g, in, ag_got, a, DType::kInt8);
      float largest = 0;
      for (float v : in) largest = std::max(largest, std::abs(v));
      const double ag_bound = 1.01 * static_cast<double>(g.axes().size()) * group_max(g, largest) / 127.5;
      for (int64_t i = 0; i < m * n; ++i) CHECK(std::abs(ag_got[i] - ag_expect[i]) <= ag_bound);
      CHECK(identical_on_group(g, ag_got));
    }
  });
}

// The same gradient reduced 40 times: with feedback the summed results stay within a few
// roundings of 40 x the exact sum; without it the same rounding repeats every step.
TEST_CASE("error feedback: the drift of many int8 reductions stays bounded") {
  for_each_group([](Mesh&, const AxisGroup& g, Algorithm a) {
    const int n = g.size();
    const int steps = 40;
    const int64_t m = 301;
    const std::vector<float> x = reals(m * n + 5, g.rank());
    std::vector<float> exact = x;
    all_reduce(g, exact, ReduceOp::kSum, Algorithm::kNative);
    const double bound = int8_bound(g, CollectiveOp::kAllReduce, sum_of_magnitudes_max(g, x));

    std::vector<float> feedback(error_feedback_floats(g, CollectiveOp::kAllReduce, static_cast<int64_t>(x.size())), 0.0f);
    std::vector<double> with(x.size(), 0.0), without(x.size(), 0.0);
    for (int t = 0; t < steps; ++t) {
      std::vector<float> b = x, c = x;
      all_reduce(g, b, ReduceOp::kSum, a, DType::kInt8, feedback);
      all_reduce(g, c, ReduceOp::kSum, a, DType::kInt8);
      CHECK(identical_on_group(g, b));
      for (size_t i = 0; i < x.size(); ++i) {
        with[i] += b[i];
        without[i] += c[i];
      }
    }
    double drift_with = 0, drift_without = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      drift_with = std::max(drift_with, std::abs(with[i] - steps * static_cast<double>(exact[i])));
      drift_without = std::max(drift_without, std::abs(without[i] - steps * static_cast<double>(exact[i])));
    }
    CAPTURE(drift_with);
    CAPTURE(drift_without);
    CHECK(drift_with <= 2 * bound + 1e-4 * steps);
    CHECK(drift_without > 5 * drift_with);

    // reduce_scatter: the same, each rank's slice.
    const std::vector<float> full = reals(m * n, g.rank());
    std::vector<float> rs_exact(m);
    reduce_scatter(g, full, rs_exact, Algorithm::kNative);
    std::vector<float> rs_feedback(error_feedback_floats(g, CollectiveOp::kReduceScatter, m * n), 0.0f);
    std::vector<double> rs_with(m, 0.0);
    for (int t = 0; t < steps; ++t) {
      std::vector<float> out(m);
      reduce_scatter(g, full, out, a, DType::kInt8, rs_feedback);
      for (int64_t i = 0; i < m; ++i) rs_with[i] += out[i];
    }
    const double rs_bound = int8_bound(g, CollectiveOp::kReduceScatter, sum_of_magnitudes_max(g, full));
    for (int64_t i = 0; i < m; ++i) CHECK(std::abs(rs_with[i] - steps * static_cast<double>(rs_exact[i])) <= 2 * rs_bound + 1e-4 * steps);
  });
}

TEST_CASE("the trace counts the bytes that travel; a feedback buffer of the wrong size is refused on every rank") {
  const int n = world_size();
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(n));
  const AxisGroup& g = mesh.axis("data");
  std::vector<float> v(1000 * n, 1.0f);
  all_reduce(g, v, ReduceOp::kSum, Algorithm::kRing, DType::kInt8);
  all_reduce(g, v, ReduceOp::kSum, Algorithm::kRing, DType::kBF16);
  REQUIRE(mesh.context().trace.totals().size() == 1);
  CHECK(mesh.context().trace.totals()[0].bytes == wire_bytes(DType::kInt8, 1000 * n) + wire_bytes(DType::kBF16, 1000 * n));

  std::vector<float> wrong(5);
  CHECK_THROWS_WITH_AS(all_reduce(g, v, ReduceOp::kSum, Algorithm::kRing, DType::kInt8, wrong),
                       doctest::Contains("error feedback of 5 floats"), UserError);
  std::vector<float> out(1000);
  CHECK_THROWS_AS(reduce_scatter(g, v, out, Algorithm::kAuto, DType::kInt8, wrong), UserError);
}
