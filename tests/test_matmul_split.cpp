// The thread split of large 2-d matmuls (framework/ops/matmul.h): every shape and flag that
// reaches it equals the product computed directly, on integer-valued data where fp32 (and
// bf16, for these small integers) is exact, so equal means bit for bit whatever the order
// of the sums.
#include <doctest/doctest.h>
#include <omp.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "framework/ops/bf16.h"
#include "framework/ops/gemm.h"

using namespace shardlab;

namespace {

// Integers in [-3, 3]: exact in bf16, and every sum below stays far under 2^24.
std::vector<float> small_integers(int64_t n, int64_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + seed * 13 + (i / 5) * 3) % 7 - 3);
  return v;
}

struct Case {
  int64_t m, k, n;
  bool trans_a, trans_b;
  MatmulFlags flags;
};

// C = alpha * (op(A) op(B) (+ bias)) (+ C) with doubles, from the stored layouts: oneDNN
// scales after adding the bias.
std::vector<float> reference(const Case& c, const std::vector<float>& a, const std::vector<float>& b,
                             const std::vector<float>& bias, std::vector<float> out) {
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        s += static_cast<double>(c.trans_a ? a[p * c.m + i] : a[i * c.k + p]) *
             (c.trans_b ? b[j * c.k + p] : b[p * c.n + j]);
      }
      if (c.flags.bias) s += bias[j];
      s *= c.flags.alpha;
      out[i * c.n + j] = static_cast<float>(c.flags.accumulate ? out[i * c.n + j] + s : s);
    }
  }
  return out;
}

template <class T>
std::vector<float> run(const Case& c, const std::vector<float>& a, const std::vector<float>& b,
                       const std::vector<float>& bias, std::vector<float> out) {
  const auto as_t = [](const std::vector<float>& v) {
    std::vector<T> t(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, float>) {
        t[i] = v[i];
      } else {
        t[i] = to_bf16(v[i]);
      }
    }
    return t;
  };
  const std::vector<T> at = as_t(a), bt = as_t(b);
  matmul_raw(at.data(), MatView::matrix(c.m, c.k, c.trans_a ? c.m : c.k, c.trans_a), bt.data(),
             MatView::matrix(c.k, c.n, c.trans_b ? c.k : c.n, c.trans_b), out.data(), MatView::matrix(c.m, c.n, c.n),
             c.flags, c.flags.bias ? bias.data() : nullptr);
  return out;
}

void check_all(int threads, bool expect_split) {
  omp_set_num_threads(threads);
  const Case cases[] = {
      {801, 96, 80, false, true, {}},                                   // rows, uneven shares (a forward)
      {800, 72, 96, false, false, {.alpha = 0.5f}},                     // rows, scaled
      {777, 64, 64, false, false, {.accumulate = true, .bias = true}},  // rows into C (accumulation), bias
      {80, 801, 72, true, false, {}},                                   // reduction (a weight gradient)
      {96, 900, 64, true, false, {.alpha = 2.0f, .accumulate = true}},  // reduction into C, scaled
      {64, 1031, 80, false, true, {.bias = true}},                      // reduction with bias
  };
  for (const Case& c : cases) {
    CAPTURE(c.m);
    CAPTURE(c.k);
    CAPTURE(threads);
    const std::vector<float> a = small_integers(c.m * c.k, 1), b = small_integers(c.k * c.n, 2),
                             bias = small_integers(c.n, 3), c0 = small_integers(c.m * c.n, 4);
    const std::vector<float> want = reference(c, a, b, bias, c0);
    const int64_t before = thread_split_matmuls();
    CHECK(run<float>(c, a, b, bias, c0) == want);
    CHECK(run<Bf16>(c, a, b, bias, c0) == want);
    CHECK(thread_split_matmuls() - before == (expect_split ? 2 : 0));
  }
}

}  // namespace

TEST_CASE("a matmul split over 2 or 3 threads, by rows or by reduction, equals the direct product") {
  check_all(2, true);
  check_all(3, true);
}

TEST_CASE("unsplit: one thread, a batched view, a small matmul, large partial products, the switch off") {
  check_all(1, false);
  set_matmul_thread_split(false);
  check_all(2, false);
  set_matmul_thread_split(true);
  omp_set_num_threads(2);
  const Case small{128, 64, 64, false, false, {}};  // 64 rows a thread: below the split's share
  const std::vector<float> a = small_integers(small.m * small.k, 1), b = small_integers(small.k * small.n, 2);
  const int64_t before = thread_split_matmuls();
  CHECK(run<float>(small, a, b, {}, std::vector<float>(small.m * small.n)) ==
        reference(small, a, b, {}, std::vector<float>(small.m * small.n)));
  CHECK(thread_split_matmuls() == before);

  // Two matrices of 600 x 64 x 64 in one call (a batch dim): not split.
  const int64_t G = 2, M = 600, D = 64;
  const std::vector<float> ga = small_integers(G * M * D, 5), gb = small_integers(G * D * D, 6);
  std::vector<float> gc(G * M * D);
  const auto view = [G](int64_t r, int64_t c) { return MatView::batched({1, G, r, c}, {G * r * c, r * c, c, 1}); };
  matmul_raw(ga.data(), view(M, D), gb.data(), view(D, D), gc.data(), view(M, D));
  CHECK(thread_split_matmuls() == before);
  for (int64_t g = 0; g < G; ++g) {
    const Case one{M, D, D, false, false, {}};
    const std::vector<float> a1(ga.begin() + g * M * D, ga.begin() + (g + 1) * M * D),
        b1(gb.begin() + g * D * D, gb.begin() + (g + 1) * D * D);
    CHECK(std::vector<float>(gc.begin() + g * M * D, gc.begin() + (g + 1) * M * D) ==
          reference(one, a1, b1, {}, std::vector<float>(M * D)));
  }

  // A reduction split would hold 2 partial products of 1024 x 2304 on 3 threads, 18.9 MiB:
  // past the 16 MiB bound, oneDNN partitions it. (Zeros: only the path is checked here.)
  omp_set_num_threads(3);
  const int64_t R = 1024, N = 2304, K = 4096;
  const std::vector<float> za(R * K, 0.0f), zb(K * N, 0.0f);
  std::vector<float> zc(R * N, 1.0f);
  const int64_t before_large = thread_split_matmuls();
  matmul_raw(za.data(), MatView::matrix(R, K, K), zb.data(), MatView::matrix(K, N, N), zc.data(),
             MatView::matrix(R, N, N));
  CHECK(thread_split_matmuls() == before_large);
  CHECK(zc[0] == 0.0f);
  omp_set_num_threads(2);
}
