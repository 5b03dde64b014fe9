// Weight compute copies (framework/ops/compute_copies.h): a matmul served a weight's copy
// computes bitwise what the uncached bf16 op computes, on both bf16 paths; the copy is made
// once (the fp32 weight is not read again while the scope lives); it is never served to a
// tensor whose storage was replaced, to another precision or to another thread; and a
// scope's end unregisters its copies.
#include <doctest/doctest.h>

#include <cstring>
#include <thread>

#include "framework/autograd.h"
#include "framework/ops.h"
#include "framework/ops/compute_copies.h"
#include "tests/gradcheck.h"

using namespace shardlab;
using shardlab::testing::random_tensor;

namespace {

const ComputePrecision kNative{.compute = DType::kBF16, .matmul = Bf16Matmul::kNative};
const ComputePrecision kRounded{.compute = DType::kBF16, .matmul = Bf16Matmul::kRounded};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0;
}

Tensor linear_in(const ComputePrecision& precision, const Tensor& x, const Tensor& w) {
  const PrecisionScope scope(precision);
  return ops::linear(x, w).detach();
}

// linear's output and its gradients for x, w and b, under `precision`.
std::vector<Tensor> linear_with_gradients(const ComputePrecision& precision, Tensor x, Tensor w, Tensor b,
                                          const Tensor& seed) {
  for (Tensor* t : {&x, &w, &b}) t->zero_grad();
  const PrecisionScope scope(precision);
  const Tensor y = ops::linear(x, w, b);
  run_backward(y, seed);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("with compute copies, linear and its gradients are bitwise the uncached bf16 op's, on both paths") {
  Tensor x = random_tensor({3, 5, 48}, 1), w = random_tensor({24, 48}, 2), b = random_tensor({24}, 3);
  for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
  const Tensor seed = random_tensor({3, 5, 24}, 4);
  const std::vector<Tensor> fp32 = linear_with_gradients({}, x, w, b, seed);
  for (const ComputePrecision& path : {kNative, kRounded}) {
    CAPTURE(bf16_matmul_name(path.matmul));
    const std::vector<Tensor> want = linear_with_gradients(path, x, w, b, seed);
    const ComputeCopies copies({w}, path);
    CHECK(copies.tensors() == 1);
    CHECK(copies.bytes() == w.numel() * (path.matmul == Bf16Matmul::kNative ? 2 : 4));
    const std::vector<Tensor> got = linear_with_gradients(path, x, w, b, seed);
    CHECK(copies.served() == 2);  // the forward product and x's gradient (w's reads x and the output gradient)
    for (size_t k = 0; k < got.size(); ++k) CHECK_MESSAGE(same_bits(got[k], want[k]), "output/gradient " << k);
    CHECK_FALSE(same_bits(got[0], fp32[0]));  // bf16 really, not the fp32 weights
  }
}

TEST_CASE("the experts' grouped GEMM takes its 3-d weights' copies, bitwise as uncached") {
  const Tensor x = random_tensor({3, 7, 32}, 1), w = random_tensor({3, 16, 32}, 2);
  for (const ComputePrecision& path : {kNative, kRounded}) {
    const auto grouped = [&] {
      const PrecisionScope scope(path);
      return ops::batched_linear(x, w).detach();
    };
    const Tensor want = grouped();
    const ComputeCopies copies({w}, path);
    CHECK(same_bits(grouped(), want));
    CHECK(copies.served() == 1);
  }
}

TEST_CASE("a copy is made once: the weight's fp32 values are not read again until the scope ends") {
  const Tensor x = random_tensor({4, 32}, 1);
  for (const ComputePrecision& path : {kNative, kRounded}) {
    CAPTURE(bf16_matmul_name(path.matmul));
    Tensor w = random_tensor({8, 32}, 2);
    const Tensor before = linear_in(path, x, w);
    {
      const ComputeCopies copies({w}, path);
      // Against the contract, on purpose: same storage, new values. The copy still serves
      // the old ones, so the matmul did not read w.
      w.copy_(random_tensor({8, 32}, 3));
      CHECK(same_bits(linear_in(path, x, w), before));
      CHECK(copies.served() == 1);
    }
    // Unregistered: w is converted again, as a tensor no scope ever saw (a clone) is.
    const Tensor after = linear_in(path, x, w);
    CHECK_FALSE(same_bits(after, before));
    CHECK(same_bits(after, linear_in(path, x, w.clone())));
  }
}

TEST_CASE("a tensor whose storage was replaced is not served the stale copy") {
  const Tensor x = random_tensor({4, 32}, 1);
  for (const ComputePrecision& path : {kNative, kRounded}) {
    CAPTURE(bf16_matmul_name(path.matmul));
    Tensor w = random_tensor({8, 32}, 2);
    const Tensor old_values = linear_in(path, x, w);
    const ComputeCopies copies({w}, path);
    // The same TensorImpl moved to new storage (as FSDP's gather does), holding new values.
    const Tensor replacement = random_tensor({8, 32}, 3);
    const auto storage = std::make_shared<Storage>(w.numel());
    std::memcpy(storage->data(), replacement.data(), w.numel() * sizeof(float));
    w.share_storage(storage, 0);
    const Tensor got = linear_in(path, x, w);
    CHECK(copies.served() == 0);
    CHECK(same_bits(got, linear_in(path, x, replacement)));
    CHECK_FALSE(same_bits(got, old_values));
    // A new TensorImpl over the same values (a view) is not the registered tensor either.
    linear_in(path, x, w.view({8, 32}));
    CHECK(copies.served() == 0);
  }
}

TEST_CASE("copies serve only their own precision and thread; fp32 copies nothing") {
  const Tensor x = random_tensor({4, 32}, 1), w = random_tensor({8, 32}, 2);
  const Tensor rounded = linear_in(kRounded, x, w), fp32 = linear_in({}, x, w);
  const ComputeCopies copies({w}, kNative);
  CHECK(same_bits(linear_in(kRounded, x, w), rounded));
  CHECK(same_bits(linear_in({}, x, w), fp32));
  std::thread([&] { linear_in(kNative, x, w); }).join();  // another thread's matmul converts its own
  CHECK(copies.served() == 0);
  linear_in(kNative, x, w);
  CHECK(copies.served() == 1);
  const ComputeCopies none({w}, {});
  CHECK(none.tensors() == 0);
  CHECK(none.bytes() == 0);
}

TEST_CASE("scopes nest: each serves its own tensors, and the inner one's end unregisters only its copies") {
  const Tensor x = random_tensor({4, 32}, 1), a = random_tensor({8, 32}, 2), b = random_tensor({8, 32}, 3);
  const Tensor want_b = linear_in(kNative, x, b);
  const ComputeCopies outer({a}, kNative);
  {
    const ComputeCopies inner({b}, kNative);
    linear_in(kNative, x, a);
    CHECK(same_bits(linear_in(kNative, x, b), want_b));
    CHECK(outer.served() == 1);
    CHECK(inner.served() == 1);
  }
  linear_in(kNative, x, a);
  CHECK(same_bits(linear_in(kNative, x, b), want_b));  // converted again: no copy of b is live
  CHECK(outer.served() == 2);
}

// Decode panels (ComputeCopies::Options::decode_panels): ops::linear multiplies a decode
// step's rows from them, in fp32 and in bf16, and a GEMM's many rows from the weight.
TEST_CASE("decode panels serve linear's few rows in the scope's precision, within rounding of the uncached op") {
  const Tensor w = random_tensor({40, 96}, 3), b = random_tensor({40}, 4);
  const auto linear = [&](const ComputePrecision& precision, const Tensor& x) {
    const PrecisionScope scope(precision);
    const NoGradGuard no_grad;
    return ops::linear(x, w, b);
  };
  for (const ComputePrecision& precision : {ComputePrecision{}, kNative, kRounded}) {
    CAPTURE(precision.bf16());
    for (const int64_t rows : {int64_t{1}, int64_t{5}, kMatvecMaxRows + 1, kMatvecPanelsMaxRowsBf16,
                               kMatvecPanelsMaxRowsBf16 + 1, kMatvecPanelsMaxRows, kMatvecPanelsMaxRows + 1}) {
      CAPTURE(rows);
      const Tensor x = random_tensor({rows, 96}, 5 + rows);
      const Tensor uncached = linear(precision, x);  // matvec or oneDNN on the weight itself
      const ComputeCopies copies({w}, precision, {.decode_panels = true});
      // fp32: only the panels (3 of 16 columns); bf16 adds the matmul copy.
      const int64_t operand = precision.bf16() ? 40 * 96 * (precision.matmul == Bf16Matmul::kNative ? 2 : 4) : 0;
      CHECK(copies.bytes() == 3 * 16 * 96 * (precision.bf16() ? 2 : 4) + operand);
      const Tensor y = linear(precision, x);
      // Up to kMatvecPanelsMaxRows rows (bf16: kMatvecPanelsMaxRowsBf16) take the panels;
      // more take the bf16 operand copy (fp32: the weight itself).
      CHECK(copies.served() == (rows <= kMatvecPanelsMaxRows || precision.bf16() ? 1 : 0));
      if (precision.bf16() && rows > kMatvecPanelsMaxRowsBf16) {  // the operand copy: bitwise the uncached GEMM
        for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.data()[i] == uncached.data()[i]);
      }
      for (int64_t i = 0; i < y.numel(); ++i) CHECK(y.data()[i] == doctest::Approx(uncached.data()[i]).epsilon(1e-5));
    }
  }
}
