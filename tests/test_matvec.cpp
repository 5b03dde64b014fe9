// matvec (the decode step's few-row products) against oneDNN's matmul and the definition.
#include <doctest/doctest.h>

#include <cmath>

#include "framework/autograd.h"
#include "framework/ops.h"
#include "framework/ops/matvec.h"
#include "tests/gradcheck.h"

using namespace shardlab;
using shardlab::testing::random_tensor;

TEST_CASE("matvec equals x w^T + b for every row count, ragged N and K") {
  const int64_t N = 37, K = 53;  // neither a multiple of the 4 weight rows nor the 16 lanes
  Tensor w = random_tensor({N, K}, 2), b = random_tensor({N}, 3);
  for (int64_t M = 1; M <= 9; ++M) {
    Tensor x = random_tensor({M, K}, 10 + M);
    Tensor y = Tensor::empty({M, N});
    matvec(x.data(), w.data(), b.data(), y.data(), M, N, K);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double ref = b.data()[n];
        for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x.data()[m * K + k]) * w.data()[n * K + k];
        CAPTURE(M);
        CHECK(y.data()[m * N + n] == doctest::Approx(ref).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("a row's matvec result is bitwise the same alone and among others") {
  const int64_t N = 70, K = 300, M = 7;
  Tensor w = random_tensor({N, K}, 4), x = random_tensor({M, K}, 5);
  Tensor all = Tensor::empty({M, N});
  matvec(x.data(), w.data(), nullptr, all.data(), M, N, K);
  for (int64_t m = 0; m < M; ++m) {
    Tensor one = Tensor::empty({1, N});
    matvec(x.data() + m * K, w.data(), nullptr, one.data(), 1, N, K);
    for (int64_t n = 0; n < N; ++n) REQUIRE(one.data()[n] == all.data()[m * N + n]);
  }
}

TEST_CASE("linear of kMatvecMaxRows rows (matvec) agrees with the same rows in a GEMM of one more") {
  const int64_t N = 24, K = 40;
  Tensor w = random_tensor({N, K}, 6), b = random_tensor({N}, 7);
  Tensor x = random_tensor({kMatvecMaxRows + 1, K}, 8);
  NoGradGuard no_grad;
  const Tensor gemm = ops::linear(x, w, b);  // kMatvecMaxRows + 1 rows: oneDNN
  const Tensor few = ops::linear(x.rows(0, kMatvecMaxRows), w, b);  // matvec
  for (int64_t i = 0; i < kMatvecMaxRows * N; ++i) CHECK(few.data()[i] == doctest::Approx(gemm.data()[i]).epsilon(1e-5));
}
