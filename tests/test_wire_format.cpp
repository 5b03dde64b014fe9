// Wire formats (framework/ops/wire_format.h): byte counts, the int8 block codec's error
// bound, idempotence, non-finite blocks, and error feedback's bounded drift.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "framework/ops/bf16.h"
#include "framework/ops/wire_format.h"

using namespace shardlab;

namespace {

std::vector<uint8_t> encoded(DType wire, const std::vector<float>& x, float* residual = nullptr) {
  std::vector<uint8_t> bytes(static_cast<size_t>(wire_bytes(wire, static_cast<int64_t>(x.size()))));
  encode(wire, x.data(), static_cast<int64_t>(x.size()), bytes.data(), residual);
  return bytes;
}

std::vector<float> decoded(DType wire, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> y(n);
  decode(wire, bytes.data(), static_cast<int64_t>(n), y.data());
  return y;
}

// Values whose magnitudes vary by 10^6 from block to block and by 10^3 within one.
std::vector<float> varied(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const float block_scale = std::pow(10.0f, static_cast<float>((i / kInt8Block) % 7) - 3.0f);
    x[i] = block_scale * u(rng) * (i % 5 == 0 ? 1.0f : 1e-3f);
  }
  return x;
}

// The exponent byte of block b of an int8 message of n values.
int8_t exponent_of(const std::vector<uint8_t>& bytes, size_t b) { return static_cast<int8_t>(bytes[b]); }

}  // namespace

TEST_CASE("bytes on the wire: fp32 4n, bf16 2n, int8 n plus one exponent per block of 256") {
  for (int64_t n : {0, 1, 255, 256, 257, 1000}) {
    CHECK(wire_bytes(DType::kF32, n) == 4 * n);
    CHECK(wire_bytes(DType::kBF16, n) == 2 * n);
    CHECK(wire_bytes(DType::kInt8, n) == n + (n + 255) / 256);
  }
  CHECK(static_cast<double>(wire_bytes(DType::kF32, 1 << 20)) / static_cast<double>(wire_bytes(DType::kInt8, 1 << 20)) ==
        doctest::Approx(3.984).epsilon(1e-3));
}

TEST_CASE("int8 blocks: every value within A/127.5 of its block's largest magnitude A, for any size") {
  for (size_t n : {size_t{1}, size_t{7}, size_t{255}, size_t{256}, size_t{257}, size_t{1000}, size_t{4099}}) {
    CAPTURE(n);
    const std::vector<float> x = varied(n, static_cast<unsigned>(n));
    const std::vector<uint8_t> bytes = encoded(DType::kInt8, x);
    const std::vector<float> y = decoded(DType::kInt8, bytes, n);
    for (size_t begin = 0; begin < n; begin += kInt8Block) {
      const size_t len = std::min<size_t>(kInt8Block, n - begin);
      const float bound = int8_block_error_bound(x.data() + begin, static_cast<int64_t>(len));
      float amax = 0, qmax = 0;
      const float scale = std::ldexp(1.0f, exponent_of(bytes, begin / kInt8Block));
      for (size_t i = begin; i < begin + len; ++i) {
        CHECK(std::abs(y[i] - x[i]) <= bound);
        CHECK(std::abs(y[i] - x[i]) <= scale / 2);  // round to nearest
        amax = std::max(amax, std::abs(x[i]));
        qmax = std::max(qmax, std::abs(y[i]) / scale);
      }
      // The scale is the smallest power of two that fits: the largest |q| is 64..127.
      CHECK(qmax >= 64);
      CHECK(qmax <= 127);
      CHECK(bound == doctest::Approx(amax / 127.5f));
    }
  }
}

TEST_CASE("int8 decoded values encode back to the same bytes, and round_to_wire equals decode(encode)") {
  const std::vector<float> x = varied(1000, 3);
  const std::vector<uint8_t> once = encoded(DType::kInt8, x);
  const std::vector<float> y = decoded(DType::kInt8, once, x.size());
  CHECK(encoded(DType::kInt8, y) == once);
  std::vector<float> r = x;
  round_to_wire(DType::kInt8, r.data(), static_cast<int64_t>(r.size()));
  CHECK(r == y);
  std::vector<float> sum(x.size());
  add_decoded(DType::kInt8, once.data(), static_cast<int64_t>(x.size()), x.data(), sum.data());
  for (size_t i = 0; i < x.size(); ++i) CHECK(sum[i] == x[i] + y[i]);
}

TEST_CASE("int8 edge values: zeros, integers, subnormal and huge blocks, 127.5 and non-finite values") {
  std::vector<float> x(4 * kInt8Block, 0.0f);
  for (int i = 0; i < kInt8Block; ++i) x[kInt8Block + i] = static_cast<float>(i % 19 - 9);  // small integers: exact
  x[2 * kInt8Block] = 1e-41f;                                                            // subnormal
  x[2 * kInt8Block + 1] = -3e-39f;
  x[3 * kInt8Block] = 3.0e38f;  // near FLT_MAX
  x[3 * kInt8Block + 1] = -1.0f;
  std::vector<float> y = decoded(DType::kInt8, encoded(DType::kInt8, x), x.size());
  for (int i = 0; i < kInt8Block; ++i) CHECK(y[i] == 0.0f);
  for (int i = kInt8Block; i < 2 * kInt8Block; ++i) CHECK(y[i] == x[i]);
  CHECK(std::abs(y[2 * kInt8Block + 1] - x[2 * kInt8Block + 1]) <= std::ldexp(1.0f, -128));
  CHECK(y[3 * kInt8Block] == doctest::Approx(3.0e38f).epsilon(1.0 / 127));
  CHECK(std::isfinite(y[3 * kInt8Block]));

  // 127.5 rounds to 128 at the first scale, so the block takes the next one.
  std::vector<float> edge = {127.5f, 1.0f};
  std::vector<uint8_t> bytes = encoded(DType::kInt8, edge);
  CHECK(exponent_of(bytes, 0) == 1);
  CHECK(decoded(DType::kInt8, bytes, 2)[0] == 128.0f);

  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    std::vector<float> z = varied(3 * kInt8Block, 5);
    z[kInt8Block + 10] = bad;
    const std::vector<float> w = decoded(DType::kInt8, encoded(DType::kInt8, z), z.size());
    for (int i = 0; i < kInt8Block; ++i) CHECK(std::isfinite(w[i]));
    for (int i = kInt8Block; i < 2 * kInt8Block; ++i) CHECK(std::isnan(w[i]));  // the block travels as non-finite
    for (int i = 2 * kInt8Block; i < 3 * kInt8Block; ++i) CHECK(std::isfinite(w[i]));
  }
}

// Error feedback: sum over steps of what was sent = sum of the values - the last residual,
// so the drift stays within one rounding however many steps run; without it, a value
// that rounds the same way every step drifts by one rounding per step.
TEST_CASE("error feedback keeps the drift of many compressed steps within one rounding") {
  for (DType wire : {DType::kInt8, DType::kBF16}) {
    CAPTURE(dtype_name(wire));
    const size_t n = 700;
    const int steps = 200;
    std::vector<float> residual(n, 0.0f);
    std::vector<double> sent(n, 0.0), plain(n, 0.0), exact(n, 0.0);
    float bound = 0;
    for (int t = 0; t < steps; ++t) {
      std::vector<float> g = varied(n, 11);  // the same gradient every step: the worst case
      for (size_t i = 0; i < n; ++i) g[i] *= 1.0f + 0.001f * static_cast<float>(t % 3);
      const std::vector<float> with = decoded(wire, encoded(wire, g, residual.data()), n);
      const std::vector<float> without = decoded(wire, encoded(wire, g), n);
      for (size_t i = 0; i < n; ++i) {
        sent[i] += with[i];
        plain[i] += without[i];
        exact[i] += g[i];
      }
      if (wire == DType::kInt8) {
        for (size_t b = 0; b < n; b += kInt8Block) {
          bound = std::max(bound, 2 * int8_block_error_bound(g.data() + b, static_cast<int64_t>(std::min<size_t>(kInt8Block, n - b))));
        }
      }
    }
    double worst_with = 0, worst_without = 0;
    for (size_t i = 0; i < n; ++i) {
      CHECK(std::abs(sent[i] + residual[i] - exact[i]) <= 1e-4 * std::abs(exact[i]) + 1e-6);  // telescopes
      const double allowed = wire == DType::kInt8 ? bound : std::ldexp(std::abs(exact[i]) / steps, -7);
      CHECK(std::abs(sent[i] - exact[i]) <= allowed + 1e-4 * std::abs(exact[i]));
      worst_with = std::max(worst_with, std::abs(sent[i] - exact[i]));
      worst_without = std::max(worst_without, std::abs(plain[i] - exact[i]));
    }
    CHECK(worst_without > 20 * worst_with);  // the test would see feedback switched off
  }
}

TEST_CASE("bf16 with error feedback and the fp32 wire") {
  const std::vector<float> x = varied(300, 9);
  std::vector<float> residual(x.size(), 0.0f);
  const std::vector<float> y = decoded(DType::kBF16, encoded(DType::kBF16, x, residual.data()), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(y[i] == round_bf16(x[i]));
    CHECK(residual[i] == x[i] - y[i]);
  }
  CHECK(decoded(DType::kF32, encoded(DType::kF32, x), x.size()) == x);
}
