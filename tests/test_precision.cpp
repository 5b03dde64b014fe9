// bf16 compute (framework/precision.h): conversions, every matmul-shaped op and its
// backward on both bf16 paths against the fp32 op, and the path selection.
//
// Tolerances. Rounding to bf16 has unit roundoff u = 2^-8, so a product of two rounded
// operands is off by at most (2u + u^2)|a||b|, and an fp32 sum of K terms adds at most
// K * 2^-24 of the sum of their magnitudes. A bf16 matmul entry therefore differs from the
// fp32 one by at most (2u + u^2 + K 2^-24) * sum_k |a_k||b_k| -- the fp32 op applied to the
// operands' absolute values gives that sum exactly, entry by entry, for forward and backward.
// On operands a bf16 can hold exactly, only the summation order differs: fp32 tolerance.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops.h"
#include "framework/peak.h"
#include "framework/precision.h"
#include "tests/gradcheck.h"

using namespace shardlab;
using shardlab::testing::random_tensor;
using V = std::vector<Tensor>;
using Op = std::function<Tensor(V&)>;

namespace {

constexpr double kU = 1.0 / 256.0;  // bf16's unit roundoff, 2^-8

const ComputePrecision kPaths[] = {{.compute = DType::kBF16, .matmul = Bf16Matmul::kNative},
                                   {.compute = DType::kBF16, .matmul = Bf16Matmul::kRounded}};

Tensor rounded(const Tensor& x) { return rounded_to_bf16(x); }

Tensor absolute(const Tensor& x) {
  Tensor r = x.clone();
  for (float& v : r.span()) v = std::abs(v);
  return r;
}

// The op's output and its input gradients for seed r, under `precision`.
V run(const Op& f, V inputs, const Tensor& r, const ComputePrecision& precision) {
  for (Tensor& x : inputs) x = x.clone().set_requires_grad(true);
  const PrecisionScope scope(precision);
  Tensor y = f(inputs);
  run_backward(y, r);
  V out{y.detach()};
  for (Tensor& x : inputs) out.push_back(x.grad());
  return out;
}

// |got - want| <= tolerance elementwise; counts and reports the first misses.
void check_within(const Tensor& got, const Tensor& want, const std::function<double(int64_t)>& tolerance,
                  const std::string& what) {
  REQUIRE(got.numel() == want.numel());
  int bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double err = std::abs(static_cast<double>(got.data()[i]) - want.data()[i]);
    if (!(err <= tolerance(i)) && bad++ < 3) {
      FAIL_CHECK(what << " element " << i << ": " << got.data()[i] << " vs " << want.data()[i] << ", allowed "
                      << tolerance(i));
    }
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " elements outside tolerance");
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
  return m;
}

// A bilinear op (linear, batched_linear, matmul) on both bf16 paths against fp32:
// (1) random operands within the bound above, and visibly not fp32;
// (2) bf16-exact operands and seed: equal to fp32 within fp32 summation error.
void check_bilinear(const Op& f, const V& inputs, int64_t reduction) {
  const double fp32 = std::pow(2.0, -24) * static_cast<double>(reduction);
  const double bound = 2 * kU + kU * kU + fp32;
  Tensor probe = f(const_cast<V&>(inputs));
  const Tensor r = random_tensor(probe.shape(), 99);
  const V want = run(f, inputs, r, {});
  V magnitudes;
  for (const Tensor& x : inputs) magnitudes.push_back(absolute(x));
  // Entry by entry, the sums of |a||b| behind each output and each gradient.
  const V sums = run(f, magnitudes, absolute(r), {});
  V exact_inputs;
  for (const Tensor& x : inputs) exact_inputs.push_back(rounded(x));
  const Tensor exact_r = rounded(r);
  const V exact_want = run(f, exact_inputs, exact_r, {});
  for (const ComputePrecision& path : kPaths) {
    CAPTURE(bf16_matmul_name(path.matmul));
    const int64_t before = bf16_matmuls(path.matmul);
    const V got = run(f, inputs, r, path);
    CHECK(bf16_matmuls(path.matmul) > before);
    for (size_t k = 0; k < got.size(); ++k) {
      if (!got[k].defined()) continue;  // e.g. no bias
      const Tensor& s = sums[k];
      check_within(got[k], want[k], [&](int64_t i) { return bound * s.data()[i] + 1e-6; },
                   k == 0 ? "output" : "gradient of input " + std::to_string(k - 1));
    }
    CHECK_MESSAGE(max_abs_diff(got[0], want[0]) > 0, "bf16 gave exactly the fp32 output: it did not round");
    const V exact_got = run(f, exact_inputs, exact_r, path);
    for (size_t k = 0; k < exact_got.size(); ++k) {
      if (!exact_got[k].defined()) continue;
      const Tensor& s = sums[k];
      check_within(exact_got[k], exact_want[k], [&](int64_t i) { return 4 * fp32 * s.data()[i] + 1e-6; },
                   k == 0 ? "exact output" : "exact gradient of input " + std::to_string(k - 1));
    }
  }
}

}  // namespace

TEST_CASE("bf16 conversion rounds to nearest, ties to even, and keeps specials") {
  CHECK(to_bf16(1.0f).bits == 0x3f80);
  // Near 1 a bf16 step is 2^-7 = 2/256, so 1 + 1/256 and 1 + 3/256 are ties.
  CHECK(round_bf16(1.0f + 1.0f / 256) == 1.0f);                     // a tie: to even (down)
  CHECK(round_bf16(1.0f + 3.0f / 256) == 1.0f + 4.0f / 256);        // a tie: to even (up)
  CHECK(round_bf16(1.0f + 1.0f / 256 + 1.0f / 4096) == 1.0f + 2.0f / 256);  // above the tie: up
  CHECK(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isinf(round_bf16(std::numeric_limits<float>::infinity())));
  CHECK(round_bf16(-0.0f) == 0.0f);
  const Tensor x = random_tensor({4096}, 7, 100.0f);
  Tensor bulk = Tensor::empty(x.shape());
  round_bf16(x.data(), bulk.data(), x.numel());
  const Bf16Array half = Bf16Array::of(x.data(), x.numel());
  Tensor widened = Tensor::empty(x.shape());
  half.to_float(widened.data());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.data()[i];
    REQUIRE(bulk.data()[i] == round_bf16(v));
    REQUIRE(widened.data()[i] == bulk.data()[i]);
    REQUIRE(std::abs(bulk.data()[i] - v) <= kU * std::abs(v));
    REQUIRE(round_bf16(bulk.data()[i]) == bulk.data()[i]);  // idempotent
  }
}

// The bulk conversion (vectorised, split over threads; avx512_bf16's instruction where the
// CPU has it, and the formula on any CPU) must equal the scalar formula bit for bit,
// whatever the values -- subnormals, NaN payloads, ties, values that round to infinity --
// and wherever a vector (16 floats; 32 per instruction) or a thread's share begins or ends.
TEST_CASE("bulk bf16 conversion equals the scalar one bit for bit, specials and block edges included") {
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                            1e-39f, -3e-40f, std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffc12345u),
                            1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 3.3895314e38f};
  const Tensor noise = random_tensor({100003}, 11, 10.0f);
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{32}, int64_t{47},
                          int64_t{64}, int64_t{100003}}) {
    for (const bool sprinkled : {false, true}) {
      std::vector<float> x(noise.data(), noise.data() + n);
      for (int64_t i = 0; sprinkled && i < n; i += 7) x[i] = specials[(i / 7) % std::size(specials)];
      std::vector<Bf16> bulk(n), portable(n);
      to_bf16(x.data(), bulk.data(), n);  // avx512_bf16's instruction where this CPU has it
      to_bf16_portable(x.data(), portable.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        INFO("n " << n << " element " << i << " value " << x[i]);
        REQUIRE(bulk[i].bits == to_bf16(x[i]).bits);
        REQUIRE(portable[i].bits == to_bf16(x[i]).bits);
      }
    }
  }
}

TEST_CASE("linear in bf16 matches fp32 within the bf16 bound, forward and backward, on both paths") {
  const V in{random_tensor({3, 5, 48}, 1), random_tensor({24, 48}, 2), random_tensor({24}, 3)};
  check_bilinear([](V& v) { return ops::linear(v[0], v[1], v[2]); }, in, 48);
  check_bilinear([](V& v) { return ops::linear(v[0], v[1]); }, {in[0], in[1]}, 48);
}

TEST_CASE("the experts' grouped GEMM and batched matmul in bf16 match fp32 within the bf16 bound") {
  check_bilinear([](V& v) { return ops::batched_linear(v[0], v[1], v[2]); },
                 {random_tensor({3, 7, 32}, 1), random_tensor({3, 16, 32}, 2), random_tensor({3, 16}, 3)}, 32);
  check_bilinear([](V& v) { return ops::matmul(v[0], v[1]); }, {random_tensor({2, 3, 9, 40}, 4), random_tensor({2, 3, 40, 6}, 5)},
                 40);
}

TEST_CASE("the fused head (linear_cross_entropy) equals cross_entropy(linear) in fp32 and on both bf16 paths") {
  // Chunked (4 rows forward, 5 vocabulary columns backward) against the unfused ops under
  // the same precision: the same bf16 products, so only fp32 summation order differs.
  const V in{random_tensor({21, 32}, 1), random_tensor({17, 32}, 2)};
  std::vector<int32_t> targets(21);
  for (int32_t r = 0; r < 21; ++r) targets[r] = r % 5 == 3 ? ops::kIgnoreIndex : (r * 7) % 17;
  ops::LinearCrossEntropyOptions chunks;
  chunks.chunk_bytes = 4 * 17 * 4;
  const Op fused = [&](V& v) { return ops::linear_cross_entropy(v[0], v[1], targets, 0.0, chunks); };
  const Op unfused = [&](V& v) { return ops::cross_entropy(ops::linear(v[0], v[1]), targets); };
  const Tensor seed = Tensor::full({}, 1.0f);
  const V fp32 = run(fused, in, seed, {});
  for (const ComputePrecision& path : {ComputePrecision{}, kPaths[0], kPaths[1]}) {
    CAPTURE(path.bf16() ? bf16_matmul_name(path.matmul) : "fp32");
    const int64_t before = bf16_matmuls(path.matmul);
    const V got = run(fused, in, seed, path), want = run(unfused, in, seed, path);
    if (path.bf16()) {
      CHECK(bf16_matmuls(path.matmul) > before);
      CHECK_MESSAGE(max_abs_diff(got[0], fp32[0]) > 0, "bf16 gave exactly the fp32 loss: it did not round");
    }
    for (size_t k = 0; k < got.size(); ++k) {
      check_within(got[k], want[k], [&](int64_t i) { return 1e-5 * std::abs(want[k].data()[i]) + 1e-6; },
                   k == 0 ? "loss" : "gradient of input " + std::to_string(k - 1));
    }
  }
}

TEST_CASE("linear_with_output saves bf16 operands under a bf16 scope") {
  const Tensor x = random_tensor({6, 32}, 1), w = random_tensor({8, 32}, 2);
  check_bilinear([](V& v) { return ops::linear_with_output(v[0], v[1], Tensor(), ops::linear(v[0], v[1]).detach()); },
                 {x, w}, 32);
}

// Attention: Q K^T and P V are bf16 matmuls; the scores and the softmax are fp32, and the
// probabilities are kept for backward as P V read them (bf16), so softmax's backward reads
// them rounded too: a further relative 2u on dS, inside the gradient bound below. An output row is a convex combination of V rows, so rounding
// V and P moves it by at most 2u max|V|; rounding Q and K moves a score by at most
// 2u S (S = max_ij scale * sum_h |q_ih||k_jh|), which moves each probability by at most a
// factor exp(4u S) - 1 ~ 4u S, and the output by that times max|V|. So
// |y - y_fp32| <= (2u + 8u S) max|V|. The gradients pass through four such matmuls and
// softmax's derivative: we allow 16u (1 + S) times the largest fp32 gradient.
TEST_CASE("causal attention in bf16 matches fp32 within the bf16 bound, forward and backward") {
  const int heads = 4, kv_heads = 2;
  const int64_t B = 2, T = 70, H = 8, C = (heads + 2 * kv_heads) * H;  // T spans two row blocks
  const Tensor qkv = random_tensor({B, T, C}, 11);
  const Op f = [&](V& v) { return ops::causal_attention(v[0], heads, kv_heads); };
  const double scale = 1.0 / std::sqrt(static_cast<double>(H));
  double S = 0, vmax = 0;
  for (int64_t i = 0; i < B * T; ++i) {
    for (int64_t j = 0; j < B * T; ++j) {
      for (int n = 0; n < heads; ++n) {
        const int k = n / (heads / kv_heads);
        double s = 0;
        for (int64_t h = 0; h < H; ++h)
          s += std::abs(qkv.data()[i * C + n * H + h]) * std::abs(qkv.data()[j * C + (heads + k) * H + h]);
        S = std::max(S, s * scale);
      }
    }
    for (int64_t h = (heads + kv_heads) * H; h < C; ++h) vmax = std::max(vmax, double(std::abs(qkv.data()[i * C + h])));
  }
  const Tensor r = random_tensor({B, T, heads * H}, 99);
  const V want = run(f, {qkv}, r, {});
  double gmax = 0;
  for (float g : want[1].span()) gmax = std::max(gmax, double(std::abs(g)));
  for (const ComputePrecision& path : kPaths) {
    CAPTURE(bf16_matmul_name(path.matmul));
    const V got = run(f, {qkv}, r, path);
    check_within(got[0], want[0], [&](int64_t) { return (2 * kU + 8 * kU * S) * vmax; }, "attention output");
    check_within(got[1], want[1], [&](int64_t) { return 16 * kU * (1 + S) * gmax; }, "attention gradient");
    CHECK(max_abs_diff(got[0], want[0]) > 0);
  }
}

TEST_CASE("a precision scope sets this thread's compute precision and restores the previous one") {
  CHECK_FALSE(compute_precision().bf16());
  {
    const PrecisionScope outer({.compute = DType::kBF16, .matmul = Bf16Matmul::kNative});
    CHECK(compute_precision().bf16());
    {
      const PrecisionScope inner({});
      CHECK_FALSE(compute_precision().bf16());
    }
    CHECK(compute_precision().matmul == Bf16Matmul::kNative);
  }
  CHECK_FALSE(compute_precision().bf16());
}

TEST_CASE("dtype names parse, and anything else is a user error naming the flag") {
  CHECK(parse_dtype("bf16", "--precision") == DType::kBF16);
  CHECK(parse_dtype("fp32", "--precision") == DType::kF32);
  CHECK(dtype_bytes(DType::kBF16) == 2);
  CHECK_THROWS_WITH_AS(parse_dtype("fp16", "--reduce-dtype"), doctest::Contains("--reduce-dtype 'fp16'"), UserError);
}

TEST_CASE("the bf16 matmul path can be forced, and the environment overrides the flag") {
  unsetenv("SHARDLAB_BF16_MATMUL");
  CHECK(select_bf16_matmul("native").path == Bf16Matmul::kNative);
  CHECK(select_bf16_matmul("rounded").path == Bf16Matmul::kRounded);
  const Bf16MatmulChoice chosen = select_bf16_matmul("auto");
  CHECK(chosen.cpu_flag == cpu_has_bf16_instructions());
  CHECK_FALSE(chosen.reason.empty());
  if (chosen.cpu_flag) {  // measured, and the faster one chosen
    CHECK(chosen.bf16_gflops > 0);
    CHECK((chosen.path == Bf16Matmul::kNative) == (chosen.bf16_gflops > 1.1 * chosen.fp32_gflops));
  } else {
    CHECK(chosen.path == Bf16Matmul::kRounded);
  }
  // Decoding measures a weight-streaming matmul instead: the choice follows its rates.
  const Bf16MatmulChoice decoding = select_bf16_matmul("auto", Bf16Workload::kDecoding);
  if (decoding.cpu_flag) {
    CHECK((decoding.path == Bf16Matmul::kNative) == (decoding.bf16_gflops > 1.1 * decoding.fp32_gflops));
    CHECK(decoding.reason.find("decode-shaped") != std::string::npos);
  }
  setenv("SHARDLAB_BF16_MATMUL", "rounded", 1);
  CHECK(select_bf16_matmul("native").path == Bf16Matmul::kRounded);
  setenv("SHARDLAB_BF16_MATMUL", "fast", 1);
  CHECK_THROWS_AS(select_bf16_matmul("auto"), UserError);
  unsetenv("SHARDLAB_BF16_MATMUL");
}

// Under bf16 every parameter enters as its bf16 value (compute_value): a norm's gain and
// bias, an embedding's rows, a linear's bias -- so a layout that gathers parameters in bf16
// computes exactly what one holding them in fp32 does.
TEST_CASE("parameters read outside matmuls enter as their bf16 values under bf16") {
  const Tensor x = random_tensor({5, 24}, 1), w = random_tensor({24}, 2), b = random_tensor({24}, 3);
  const ComputePrecision bf16{.compute = DType::kBF16, .matmul = Bf16Matmul::kRounded};
  const auto same = [](const Tensor& got, const Tensor& want) {
    REQUIRE(got.numel() == want.numel());
    for (int64_t i = 0; i < got.numel(); ++i) REQUIRE(got.data()[i] == want.data()[i]);
  };
  Tensor ln, rms, emb, lin;
  {
    const PrecisionScope scope(bf16);
    ln = ops::layer_norm(x, w, b);
    rms = ops::rms_norm(x, w);
    const std::vector<int32_t> ids{3, 0, 4};
    emb = ops::embedding(random_tensor({6, 24}, 4), ids, 1, 3);
    lin = ops::linear(x, random_tensor({7, 24}, 5), random_tensor({7}, 6));
  }
  same(ln, ops::layer_norm(x, rounded(w), rounded(b)));  // fp32 op on the rounded parameters
  CHECK(max_abs_diff(ln, ops::layer_norm(x, w, b)) > 0);   // and not the fp32 op on the parameters
  same(rms, ops::rms_norm(x, rounded(w)));
  const std::vector<int32_t> ids{3, 0, 4};
  same(emb, ops::embedding(rounded(random_tensor({6, 24}, 4)), ids, 1, 3));
  const PrecisionScope scope(bf16);
  same(lin, ops::linear(x, random_tensor({7, 24}, 5), rounded(random_tensor({7}, 6))));
}

// The MFU of a bf16 run divides by the bf16 peak (framework/peak.h): measured with
// avx512_bf16's dot products where /proc/cpuinfo lists them, and 0 elsewhere, where the
// fp32 peak is the denominator since bf16 matmuls then run on the fp32 units.
TEST_CASE("the bf16 peak is measured where avx512_bf16 runs, and a bf16 run's MFU divides by it") {
  bool listed = false;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; !listed && std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) listed = (" " + line + " ").find(" avx512_bf16 ") != std::string::npos;
  }
  const double fp32 = measure_peak_flops(1, 0.05), bf16 = measure_peak_bf16_flops(1, 0.05);
  CHECK(fp32 > 0);
  CHECK((bf16 > 0) == listed);
  CHECK(mfu_denominator(false, fp32, bf16) == fp32);
  CHECK(mfu_denominator(true, fp32, bf16) == (listed ? bf16 : fp32));
  CHECK(mfu_denominator(true, 100.0, 0.0) == 100.0);
  CHECK(mfu_denominator(true, 100.0, 180.0) == 180.0);
}
