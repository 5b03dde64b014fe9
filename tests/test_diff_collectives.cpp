// Differentiable collectives: forward values and gradients equal the unsharded
// computation, which every rank can do alone because the data are a known pattern.
#include <doctest/doctest.h>
#include <mpi.h>

#include "framework/autograd.h"
#include "framework/ops/elementwise.h"
#include "parallel/comm/diff_collectives.h"
#include "tests/mpi_test_util.h"

using namespace shardlab;
using namespace shardlab::parallel;

namespace {

// Rank r's values: small integers so that sums are exact.
Tensor pattern(const Shape& shape, int rank, int salt) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>((rank * 5 + i * 3 + salt) % 11 - 5);
  return t;
}

std::vector<float> values(const Tensor& t) { return {t.data(), t.data() + t.numel()}; }

struct Setup {
  Mesh mesh{MPI_COMM_WORLD, "data=" + std::to_string(testing::world_size())};
  const AxisGroup& g = mesh.axis("data");
  int n = g.size(), r = g.rank();
};

}  // namespace

TEST_CASE("gather_from_group: all_gather forward, reduce_scatter backward") {
  Setup s;
  Tensor x = pattern({2, 3}, s.r, 1).set_requires_grad(true);
  Tensor w = pattern({2 * s.n, 3}, s.r, 2);  // each rank's loss weights
  Tensor y = gather_from_group(s.g, x);
  for (int q = 0; q < s.n; ++q) CHECK(values(y.rows(2 * q, 2)) == values(pattern({2, 3}, q, 1)));
  ops::sum(ops::mul(y, w)).backward();
  // Unsharded: total loss = sum_q sum(w_q * concat(x)); dL/dx_r = sum_q w_q[block r].
  std::vector<float> expect(6, 0.0f);
  for (int q = 0; q < s.n; ++q) {
    Tensor wq = pattern({2 * s.n, 3}, q, 2);
    for (int i = 0; i < 6; ++i) expect[i] += wq.data()[s.r * 6 + i];
  }
  CHECK(values(x.grad()) == expect);
}

TEST_CASE("scatter_to_group: reduce_scatter forward, all_gather backward") {
  Setup s;
  Tensor x = pattern({2 * s.n, 2}, s.r, 3).set_requires_grad(true);
  Tensor w = pattern({2, 2}, s.r, 4);
  Tensor y = scatter_to_group(s.g, x);
  std::vector<float> expect(4, 0.0f);
  for (int q = 0; q < s.n; ++q) {
    Tensor xq = pattern({2 * s.n, 2}, q, 3);
    for (int i = 0; i < 4; ++i) expect[i] += xq.data()[s.r * 4 + i];
  }
  CHECK(values(y) == expect);
  ops::sum(ops::mul(y, w)).backward();
  // dL/dx_r[block q] = w_q: the concatenation of every rank's weights.
  std::vector<float> grad;
  for (int q = 0; q < s.n; ++q) {
    auto wq = values(pattern({2, 2}, q, 4));
    grad.insert(grad.end(), wq.begin(), wq.end());
  }
  CHECK(values(x.grad()) == grad);
}

TEST_CASE("Megatron g and f: all_reduce/identity and identity/all_reduce") {
  Setup s;
  Tensor x = pattern({5}, s.r, 5).set_requires_grad(true);
  Tensor w = pattern({5}, s.r, 6);
  Tensor y = reduce_from_group(s.g, x);
  std::vector<float> sum(5, 0.0f), wsum(5, 0.0f);
  for (int q = 0; q < s.n; ++q) {
    for (int i = 0; i < 5; ++i) {
      sum[i] += pattern({5}, q, 5).data()[i];
      wsum[i] += pattern({5}, q, 6).data()[i];
    }
  }
  CHECK(values(y) == sum);
  ops::sum(ops::mul(y, w)).backward();
  CHECK(values(x.grad()) == values(w));  // g's backward is the identity

  Tensor x2 = pattern({5}, s.r, 5).set_requires_grad(true);
  Tensor y2 = copy_to_group(s.g, x2);
  CHECK(values(y2) == values(x2));
  ops::sum(ops::mul(y2, w)).backward();
  CHECK(values(x2.grad()) == wsum);  // f's backward sums the ranks' gradients
}

TEST_CASE("exchange_in_group: all_to_all forward, inverse all_to_all backward") {
  Setup s;
  Tensor x = pattern({s.n, 2}, s.r, 7).set_requires_grad(true);
  Tensor y = exchange_in_group(s.g, x);
  for (int q = 0; q < s.n; ++q) CHECK(values(y.rows(q, 1)) == values(pattern({s.n, 2}, q, 7).rows(s.r, 1)));
  Tensor w = pattern({s.n, 2}, s.r, 8);
  ops::sum(ops::mul(y, w)).backward();
  // y_r[q] = x_q[r], so dL/dx_r[q] = w_q[r].
  for (int q = 0; q < s.n; ++q) CHECK(values(x.grad().rows(q, 1)) == values(pattern({s.n, 2}, q, 8).rows(s.r, 1)));
}

TEST_CASE("send_to/recv_from: a two-stage pipeline's activations and gradients") {
  Setup s;
  if (s.n < 2) return;
  if (s.r == 0) {
    Tensor x = pattern({3}, 0, 9).set_requires_grad(true);
    Tensor h = ops::scale(x, 2.0f);
    Tensor token = send_to(s.g, h, 1);
    token.backward();  // receives dL/dh from stage 1
    // Stage 1's loss is sum(w * h) with w = pattern(r=1): dL/dx = 2 w.
    CHECK(values(x.grad()) == values(ops::scale(pattern({3}, 1, 10), 2.0f)));
  } else if (s.r == 1) {
    Tensor h = recv_from(s.g, {3}, 0);
    CHECK(values(h) == values(ops::scale(pattern({3}, 0, 9), 2.0f)));
    ops::sum(ops::mul(h, pattern({3}, 1, 10))).backward();  // sends dL/dh to stage 0
  }
}
