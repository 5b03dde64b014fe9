// matvec (the decode step's few-row products) against oneDNN's matmul and the definition.
#include <doctest/doctest.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>
#include <vector>

#include "framework/autograd.h"
#include "framework/ops.h"
#include "framework/ops/matvec.h"
#include "framework/ops/parallel_balanced.h"
#include "tests/gradcheck.h"

using namespace shardlab;
using shardlab::testing::random_tensor;

TEST_CASE("matvec equals x w^T + b for every row count, ragged N and K") {
  // Neither a multiple of the 4 weight rows nor the 16 lanes; the second past the threading limit.
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{37, 53}, std::pair<int64_t, int64_t>{301, 263}}) {
    CAPTURE(N);
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

namespace {

// x w^T + b in double, of the operands as given.
double reference(const float* x, const float* w, const float* b, int64_t m, int64_t n, int64_t K) {
  double ref = b ? b[n] : 0.0;
  for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x[m * K + k]) * w[n * K + k];
  return ref;
}

}  // namespace

TEST_CASE("MatvecPanels equal x w^T + b for every row count, ragged N and K, in fp32 and bf16") {
  const int64_t N = 37, K = 53;  // neither a multiple of the 16-column panels nor of a tile's panels
  Tensor w = random_tensor({N, K}, 2), b = random_tensor({N}, 3);
  const Tensor w_bf16 = rounded_to_bf16(w);
  const MatvecPanels fp32(w.data(), N, K, false), bf16(w.data(), N, K, true);
  CHECK(fp32.bytes() == 3 * 16 * K * 4);  // three panels, the last padded
  CHECK(bf16.bytes() == 3 * 16 * K * 2);
  for (int64_t M = 1; M <= 17; ++M) {
    CAPTURE(M);
    Tensor x = random_tensor({M, K}, 10 + M);
    const Tensor x_bf16 = rounded_to_bf16(x);
    Tensor y = Tensor::empty({M, N}), yb = Tensor::empty({M, N});
    fp32.multiply(x.data(), b.data(), y.data(), M);
    bf16.multiply(x.data(), b.data(), yb.data(), M);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        CHECK(y.data()[m * N + n] == doctest::Approx(reference(x.data(), w.data(), b.data(), m, n, K)).epsilon(1e-5));
        // bf16 operands, fp32 accumulation: the rounded operands' exact product to fp32's
        // rounding over K = 53 terms.
        CHECK(yb.data()[m * N + n] ==
              doctest::Approx(reference(x_bf16.data(), w_bf16.data(), b.data(), m, n, K)).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("a row's MatvecPanels result is bitwise the same alone, among others and on any thread count") {
  const int64_t N = 262, K = 300, M = 9;  // N * K past the threading limit; ragged last panel
  Tensor w = random_tensor({N, K}, 4), x = random_tensor({M, K}, 5);
  for (const bool bf16 : {false, true}) {
    CAPTURE(bf16);
    const MatvecPanels panels(w.data(), N, K, bf16);
    Tensor all = Tensor::empty({M, N});
    panels.multiply(x.data(), nullptr, all.data(), M);
    const int threads = omp_get_max_threads();
    for (const int t : {1, 2, 3}) {
      CAPTURE(t);
      omp_set_num_threads(t);
      for (int64_t m = 0; m < M; ++m) {
        Tensor one = Tensor::empty({1, N});
        panels.multiply(x.data() + m * K, nullptr, one.data(), 1);
        for (int64_t n = 0; n < N; ++n) REQUIRE(one.data()[n] == all.data()[m * N + n]);
      }
    }
    omp_set_num_threads(threads);
  }
}

TEST_CASE("parallel_balanced runs every item once, and a thread that finishes early takes a slow thread's items") {
  const int previous = omp_get_max_threads();
  for (const int threads : {1, 2, 3, 4}) {
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{64}, int64_t{1001}}) {
      CAPTURE(threads);
      CAPTURE(n);
      omp_set_num_threads(threads);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      ops::parallel_balanced(n, true, [&](int64_t i) { ++runs[static_cast<size_t>(i)]; });
      for (int64_t i = 0; i < n; ++i) REQUIRE(runs[static_cast<size_t>(i)] == 1);
    }
  }
  // Two threads, 64 items: thread 0 owns [0, 32) and stalls on the first item it runs until
  // thread 1, done with [32, 64), has run one of thread 0's items (or 30 s have passed: a
  // failure). Thread 1 takes them from the back: thread 0's range ends as a run of its own
  // items (none, if it started late) followed by thread 1's.
  omp_set_num_threads(2);
  std::vector<int> ran_on(64, -1);
  std::atomic<bool> stolen{false}, stalled{false};
  ops::parallel_balanced(64, true, [&](int64_t i) {
    const int me = omp_get_thread_num();
    ran_on[static_cast<size_t>(i)] = me;
    if (i < 32 && me == 1) stolen = true;
    if (me != 0 || stalled.exchange(true)) return;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!stolen && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  omp_set_num_threads(previous);
  CHECK(stolen);
  CHECK(std::is_sorted(ran_on.begin(), ran_on.begin() + 32));  // 0 ... 0 1 ... 1
  for (int64_t i = 32; i < 64; ++i) CHECK(ran_on[static_cast<size_t>(i)] == 1);
  // The thread count may fall short of omp_get_max_threads (nested in a parallel region):
  // the missing threads' items still run.
  omp_set_num_threads(2);
  std::vector<std::atomic<int>> nested(100);
  int inner_threads = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
  ops::parallel_balanced(100, true, [&](int64_t i) {
    ++nested[static_cast<size_t>(i)];
#pragma omp critical
    inner_threads = std::max(inner_threads, omp_get_num_threads());
  });
  CHECK(inner_threads == 1);
  omp_set_num_threads(previous);
  for (auto& r : nested) CHECK(r == 1);
}
