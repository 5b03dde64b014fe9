// Activations on bf16 wires (--precision bf16, --activation-dtype): each collective that
// moves activations between model-parallel ranks, on a bf16 wire, against the same
// collective in fp32 on the bf16-rounded inputs -- exactly where values are only moved
// (all_to_all, ppermute, send/recv, all_gather), and for sums the ring's decode, add in
// fp32, encode: on two ranks a reduce_scatter gives x_own + round(x_other) bit for bit,
// which a bf16 accumulator could not hold. Then the differentiable pairs built on them
// (Megatron's f and g, sequence parallelism's gather and scatter, the experts' exchange,
// the collective matmul) both ways, and the trace's bytes: half of fp32's. Last, the
// collective matmul against all_gather then linear, and a matmul on a bf16 all_gather
// against one on the fp32 gather. Runs at -n 2, 3 and 4.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops.h"
#include "framework/ops/bf16.h"
#include "framework/precision.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/diff_collectives.h"
#include "parallel/tensor/collective_matmul.h"
#include "tests/mpi_test_util.h"

using namespace shardlab;
using namespace shardlab::parallel;
using shardlab::testing::world_size;

namespace {

// General floats that bf16 cannot hold, different on every rank and element.
std::vector<float> reals(int64_t n, int rank, int salt = 0) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = 0.37f * static_cast<float>(rank + 1) + 0.0113f * static_cast<float>((i + salt) % 101) -
           std::sin(0.7f * static_cast<float>(i + 3 * salt));
  }
  return v;
}

std::vector<float> rounded(std::vector<float> v) {
  round_bf16(v.data(), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

Tensor tensor_of(const std::vector<float>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

std::vector<float> values(const Tensor& t) { return {t.data(), t.data() + t.numel()}; }

// The whole world as one axis, and for an even count of 4 or more as two axes; the
// neighbour algorithms on a torus and on a line.
template <typename Body>
void for_each_axis(Body body) {
  const int n = world_size();
  std::vector<std::pair<std::string, std::string>> cases = {{"data=" + std::to_string(n), "data"}};
  if (n >= 4 && n % 2 == 0) cases.push_back({"data=2,tensor=" + std::to_string(n / 2), "tensor"});
  for (const auto& [spec, axis] : cases) {
    for (Topology topology : {Topology::kTorus, Topology::kMesh}) {
      Mesh mesh(MPI_COMM_WORLD, spec, topology);
      for (Algorithm a : {Algorithm::kRing, Algorithm::kBidir, Algorithm::kAuto}) {
        CAPTURE(mesh.describe());
        CAPTURE(to_string(a));
        body(mesh, mesh.axis(axis), a);
      }
    }
  }
}

int64_t traced_bytes(const Mesh& mesh) {
  int64_t bytes = 0;
  for (const auto& t : mesh.context().trace.totals()) bytes += t.bytes;
  return bytes;
}

}  // namespace

TEST_CASE("all_to_all on bf16: the fp32 all_to_all of the rounded values, the staying block included") {
  for_each_axis([](Mesh& mesh, const AxisGroup& g, Algorithm a) {
    const int n = g.size();
    for (int64_t m : {1, 3, 1001}) {
      const std::vector<float> in = reals(n * m, g.rank());
      std::vector<float> out(in.size()), expect(in.size());
      all_to_all(g, rounded(in), expect, Algorithm::kNative);
      const int64_t before = traced_bytes(mesh);
      all_to_all(g, in, out, a, DType::kBF16);
      CHECK(out == expect);
      CHECK(traced_bytes(mesh) - before == 2 * n * m);  // half of fp32's 4 n m
      CollectiveHandle h = all_to_all_async(g, in, out, a, DType::kBF16);
      h.wait();
      CHECK(out == expect);
    }
  });
}

TEST_CASE("ppermute on bf16: the fp32 ppermute of the rounded values, any shift") {
  for_each_axis([](Mesh& mesh, const AxisGroup& g, Algorithm a) {
    const int n = g.size();
    for (int shift : {1, -1, 2, n}) {
      const std::vector<float> in = reals(777, g.rank(), shift);
      std::vector<float> out(in.size()), expect(in.size());
      ppermute(g, rounded(in), expect, shift, Algorithm::kNative);
      const int64_t before = traced_bytes(mesh);
      ppermute_async(g, in, out, shift, a, DType::kBF16).wait();
      CHECK(out == expect);
      CHECK(traced_bytes(mesh) - before == 2 * 777);
    }
  });
}

TEST_CASE("send and recv on bf16: the receiver gets the rounded values; the sender's buffer is free at once") {
  for_each_axis([](Mesh& mesh, const AxisGroup& g, Algorithm) {
    const Axis& axis = g.single_axis();
    const int next = (axis.coord + 1) % axis.size, prev = (axis.coord + axis.size - 1) % axis.size;
    std::vector<float> in = reals(513, axis.coord), out(513);
    const int64_t before = traced_bytes(mesh);
    CollectiveHandle sent = send_async(g, in, next, 3, DType::kBF16);
    std::fill(in.begin(), in.end(), 0.0f);  // encoded already
    recv(g, out, prev, 3, DType::kBF16);
    sent.wait();
    CHECK(out == rounded(reals(513, prev)));
    CHECK(traced_bytes(mesh) - before == 2 * (2 * 513));  // one send and one recv of 513 bf16 values
    CHECK_THROWS_WITH_AS(send(g, in, next, 3, DType::kInt8), doctest::Contains("not int8"), UserError);
  });
}

TEST_CASE("sums on bf16 accumulate in fp32: on two ranks reduce_scatter gives x_own + round(x_other) exactly") {
  for_each_axis([](Mesh&, const AxisGroup& g, Algorithm a) {
    const int n = g.size();
    const int64_t m = 999;
    const std::vector<float> in = reals(n * m, g.rank());
    std::vector<float> out(m), exact(m);
    reduce_scatter(g, in, out, a, DType::kBF16);
    reduce_scatter(g, in, exact, Algorithm::kNative);
    if (n == 2) {
      const std::vector<float> other = rounded(reals(n * m, 1 - g.rank()));
      int fp32_sums = 0;  // elements whose sum a bf16 accumulator could not have held
      for (int64_t i = 0; i < m; ++i) {
        const float expect = in[g.rank() * m + i] + other[g.rank() * m + i];
        CHECK(out[i] == expect);
        fp32_sums += round_bf16(expect) != expect;
      }
      CHECK(fp32_sums > m / 2);
    }
    // Any size: each of the n-1 hops rounds a partial sum by at most 2^-8 of it.
    for (int64_t i = 0; i < m; ++i) CHECK(std::abs(out[i] - exact[i]) <= (n - 1) * 0x1p-8f * 4.0f * n + 1e-6f);
  });
}

TEST_CASE("Megatron's f and g and sequence parallelism's pair on bf16, both ways") {
  for_each_axis([](Mesh&, const AxisGroup& g, Algorithm) {
    const int n = g.size(), r = g.rank();
    const Shape shape{static_cast<int64_t>(2 * n), 3, 5};
    const int64_t numel = 2 * n * 15;
    // g: all_reduce forward on the wire, within the bf16 bound of the fp32 sum, the same on every rank.
    const Tensor part = tensor_of(reals(numel, r), shape);
    const Tensor summed = reduce_from_group(g, part, Algorithm::kAuto, DType::kBF16);
    const Tensor exact = reduce_from_group(g, part);
    for (int64_t i = 0; i < numel; ++i) CHECK(std::abs(summed.data()[i] - exact.data()[i]) <= n * 0x1p-8f * 4.0f * n);
    std::vector<float> max = values(summed), min = values(summed);
    all_reduce(g, max, ReduceOp::kMax);
    for (float& v : min) v = -v;
    all_reduce(g, min, ReduceOp::kMax);
    for (int64_t i = 0; i < numel; ++i) CHECK((max[i] == summed.data()[i] && -min[i] == summed.data()[i]));
    // f: its backward is g's all_reduce on the wire.
    Tensor x = tensor_of(reals(numel, 7), shape).set_requires_grad(true);
    const Tensor w = tensor_of(reals(numel, r, 1), shape);
    ops::sum(ops::mul(copy_to_group(g, x, Algorithm::kAuto, DType::kBF16), w)).backward();
    std::vector<float> dx = values(w);
    all_reduce(g, dx, ReduceOp::kSum, Algorithm::kAuto, DType::kBF16);
    CHECK(values(x.grad()) == dx);
    // Sequence parallelism: all_gather forward gives every rank's rounded block; its
    // backward is the bf16 reduce_scatter, and scatter's backward the bf16 all_gather.
    Tensor xs = tensor_of(reals(15 * 2, r), {2, 3, 5}).set_requires_grad(true);
    const Tensor gathered = gather_from_group(g, xs, Algorithm::kAuto, DType::kBF16);
    for (int q = 0; q < n; ++q) CHECK(values(gathered.rows(2 * q, 2)) == rounded(reals(30, q)));
    ops::sum(ops::mul(gathered, w)).backward();
    std::vector<float> dxs(30);
    reduce_scatter(g, values(w), dxs, Algorithm::kAuto, DType::kBF16);
    CHECK(values(xs.grad()) == dxs);
    Tensor y = tensor_of(reals(numel, r, 2), shape).set_requires_grad(true);
    const Tensor w_small = tensor_of(reals(30, r, 3), {2, 3, 5});
    ops::sum(ops::mul(scatter_to_group(g, y, Algorithm::kAuto, DType::kBF16), w_small)).backward();
    std::vector<float> dy(numel);
    all_gather(g, rounded(values(w_small)), dy, Algorithm::kNative);
    CHECK(values(y.grad()) == dy);
  });
}

TEST_CASE("the experts' exchange on bf16: all_to_all both ways, of the rounded values") {
  for_each_axis([](Mesh&, const AxisGroup& g, Algorithm) {
    const int n = g.size(), r = g.rank();
    const Shape shape{static_cast<int64_t>(n), 4, 6};
    Tensor x = tensor_of(reals(n * 24, r), shape).set_requires_grad(true);
    const Tensor y = exchange_in_group(g, x, Algorithm::kAuto, DType::kBF16);
    std::vector<float> expect(n * 24);
    all_to_all(g, rounded(values(x)), expect, Algorithm::kNative);
    CHECK(values(y) == expect);
    const Tensor w = tensor_of(reals(n * 24, r, 5), shape);
    ops::sum(ops::mul(y, w)).backward();
    std::vector<float> dx(n * 24);
    all_to_all(g, rounded(values(w)), dx, Algorithm::kNative);
    CHECK(values(x.grad()) == dx);
  });
}

TEST_CASE("the collective matmul on bf16: the fp32 collective matmul of the rounded rows, its input gradient on the bf16 reduce_scatter") {
  for_each_axis([](Mesh&, const AxisGroup& g, Algorithm) {
    const int n = g.size(), r = g.rank();
    const Tensor w = tensor_of(reals(7 * 5, 0, 9), {7, 5}), b = tensor_of(reals(7, 0, 4), {7});
    Tensor x = tensor_of(reals(2 * 3 * 5, r), {2, 3, 5}).set_requires_grad(true);
    const Tensor y = all_gather_linear(g, x, w, b, DType::kBF16);
    const Tensor expect = all_gather_linear(g, tensor_of(rounded(values(x)), {2, 3, 5}), w, b);
    CHECK(values(y) == values(expect));
    const Tensor gy = tensor_of(reals(2 * n * 3 * 7, r, 6), {2 * n, 3, 7});
    ops::sum(ops::mul(y, gy)).backward();
    // dX = reduce_scatter(dY · W) on the wire.
    const Tensor dgathered = ops::matmul(ops::reshape(gy, {2 * n * 3, 7}), w);
    std::vector<float> dx(30);
    reduce_scatter(g, values(dgathered), dx, Algorithm::kAuto, DType::kBF16);
    CHECK(values(x.grad()) == dx);
  });
}

namespace {

// A linear layer over rows gathered from the tensor axis: each rank's rows [2, 3, 8]
// differ; the weight [5, 8] and bias are the same everywhere. Each call makes fresh leaves.
struct GatheredLinear {
  static std::vector<float> values(int64_t count, float scale, int64_t offset) {
    std::vector<float> v(count);
    for (int64_t i = 0; i < count; ++i) v[i] = std::sin(scale * static_cast<float>(i + offset));
    return v;
  }
  explicit GatheredLinear(const AxisGroup& tp) : rows(values(2 * 3 * 8, 0.3f, 1000 * tp.rank())) {}
  Tensor x() const { return Tensor::from({2, 3, 8}, rows).set_requires_grad(true); }
  static Tensor w() { return Tensor::from({5, 8}, values(5 * 8, 0.7f, 0)).set_requires_grad(true); }
  static Tensor bias() { return Tensor::from({5}, values(5, 1.1f, 0)).set_requires_grad(true); }
  // A loss that weights every output element differently.
  static Tensor loss(const Tensor& y) { return ops::sum(ops::mul(y, Tensor::from(y.shape(), values(y.numel(), 0.9f, 7)))); }
  std::vector<float> rows;
};

}  // namespace

TEST_CASE("the collective matmul equals all_gather then linear, forward and backward") {
  const int n = world_size();
  Mesh mesh(MPI_COMM_WORLD, "data=1,tensor=" + std::to_string(n));
  const AxisGroup& tp = mesh.axis("tensor");
  const GatheredLinear layer(tp);
  Tensor x1 = layer.x(), x2 = layer.x(), w1 = layer.w(), w2 = layer.w(), b1 = layer.bias(), b2 = layer.bias();
  Tensor fused = all_gather_linear(tp, x1, w1, b1);
  Tensor plain = ops::linear(gather_from_group(tp, x2), w2, b2);
  REQUIRE(fused.shape() == plain.shape());
  const auto close = [](const Tensor& a, const Tensor& c) {
    double worst = 0;
    for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, double(std::abs(a.data()[i] - c.data()[i])));
    return worst;
  };
  CHECK(close(fused, plain) <= 1e-6);
  GatheredLinear::loss(fused).backward();
  GatheredLinear::loss(plain).backward();
  CHECK(close(x1.grad(), x2.grad()) <= 1e-5);
  CHECK(close(w1.grad(), w2.grad()) <= 1e-5);
  CHECK(close(b1.grad(), b2.grad()) <= 1e-5);
}

// Sequence parallelism under bf16 gathers a region's matmul inputs as bf16
// (TensorParallelConfig::activation_dtype): the matmul rounds its operands to bf16 anyway,
// so the output and the weight's gradient are those of the fp32 gather, bit for bit, on
// both bf16 matmul paths, for half the bytes each way. The input's gradient comes back on
// the bf16 reduce_scatter: each of its n-1 hops rounds a partial sum by at most 2^-8 of it.
TEST_CASE("under bf16 a bf16 all_gather into a matmul gives the fp32 gather's results, for half the bytes") {
  const int n = world_size();
  if (n == 1) return;
  Mesh mesh(MPI_COMM_WORLD, "data=1,tensor=" + std::to_string(n));
  const AxisGroup& tp = mesh.axis("tensor");
  const GatheredLinear layer(tp);
  for (Bf16Matmul path : {Bf16Matmul::kRounded, Bf16Matmul::kNative}) {
    CAPTURE(bf16_matmul_name(path));
    const PrecisionScope bf16({.compute = DType::kBF16, .matmul = path});
    std::vector<Tensor> x, w, y;
    std::vector<int64_t> bytes;
    for (DType wire : {DType::kF32, DType::kBF16}) {
      x.push_back(layer.x());
      w.push_back(GatheredLinear::w());
      mesh.context().trace.clear();
      mesh.context().trace.set_recording(true);
      y.push_back(ops::linear(gather_from_group(tp, x.back(), Algorithm::kAuto, wire), w.back(), GatheredLinear::bias()));
      GatheredLinear::loss(y.back()).backward();
      mesh.context().trace.set_recording(false);
      REQUIRE(mesh.context().trace.events().size() == 2);  // the all_gather, and its backward's reduce_scatter
      bytes.push_back(mesh.context().trace.events().at(0).bytes + mesh.context().trace.events().at(1).bytes);
    }
    const auto same = [](const Tensor& p, const Tensor& q) {
      return std::equal(p.data(), p.data() + p.numel(), q.data(), q.data() + q.numel());
    };
    CHECK(same(y[0], y[1]));
    CHECK(same(w[0].grad(), w[1].grad()));
    const Tensor g0 = x[0].grad(), g1 = x[1].grad();
    float largest = 0;
    for (int64_t i = 0; i < g0.numel(); ++i) largest = std::max(largest, std::abs(g0.data()[i]));
    for (int64_t i = 0; i < g0.numel(); ++i) CHECK(std::abs(g0.data()[i] - g1.data()[i]) <= (n - 1) * 0x1p-8f * largest * n);
    CHECK(!same(g0, g1));  // rounded on the way: the test can tell the wires apart
    CHECK(bytes[1] * 2 == bytes[0]);
  }
}
