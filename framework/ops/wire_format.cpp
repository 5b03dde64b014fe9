#include "framework/ops/wire_format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "framework/error.h"
#include "framework/ops/bf16.h"

namespace shardlab {
namespace {

constexpr int kMinExponent = -127;
constexpr uint8_t kNonFinite = 0x80;  // the exponent byte of a block holding NaN or Inf
constexpr float kQMax = 127.0f;

int64_t blocks(int64_t n) { return (n + kInt8Block - 1) / kInt8Block; }

// Rounds |v| <= 2^22 to the nearest integer, ties to even, in two vectorisable adds: at
// magnitude 1.5 x 2^23 a float's unit is 1, so adding and removing it rounds.
constexpr float kRoundingMagic = 12582912.0f;
inline float round_even(float v) { return (v + kRoundingMagic) - kRoundingMagic; }

// The block's exponent byte: the smallest e with round(A / 2^e) <= 127 (A its largest
// magnitude), at least kMinExponent; kNonFinite if any value is NaN or infinite.
uint8_t block_exponent(const float* v, int64_t n) {
  // The largest magnitude as bits: for non-negative floats integer order is numeric order,
  // and every NaN and infinity lies above the largest finite value (an integer max
  // reduction also vectorises, where a float one with NaN semantics does not).
  uint32_t largest = 0;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::bit_cast<uint32_t>(v[i]) & 0x7fffffffu);
  if (largest >= 0x7f800000u) return kNonFinite;
  if (largest == 0) return static_cast<uint8_t>(static_cast<int8_t>(kMinExponent));
  const float amax = std::bit_cast<float>(largest);
  int k = 0;
  std::frexp(amax, &k);  // amax = m 2^k, m in [0.5, 1): amax / 2^(k-7) = 128 m in [64, 128)
  int e = k - 7;
  if (round_even(std::ldexp(amax, -e)) > kQMax) ++e;
  return static_cast<uint8_t>(static_cast<int8_t>(std::max(e, kMinExponent)));
}

float scale_of(uint8_t exponent) { return std::ldexp(1.0f, static_cast<int8_t>(exponent)); }

// q = round(v / 2^e); with `back`, also the decoded values q 2^e.
void quantize_block(const float* v, int64_t n, uint8_t exponent, int8_t* q, float* back) {
  if (exponent == kNonFinite) {
    std::memset(q, 0, static_cast<size_t>(n));
    if (back) std::fill(back, back + n, std::nanf(""));
    return;
  }
  const float inverse = std::ldexp(1.0f, -static_cast<int8_t>(exponent));  // exact: a power of two
  const float scale = scale_of(exponent);
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::clamp(round_even(v[i] * inverse), -kQMax, kQMax);
    q[i] = static_cast<int8_t>(r);
    if (back) back[i] = r * scale;
  }
}

void dequantize_block(const int8_t* q, int64_t n, uint8_t exponent, float* out) {
  if (exponent == kNonFinite) {
    std::fill(out, out + n, std::nanf(""));
    return;
  }
  const float scale = scale_of(exponent);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

// Encodes x (+ residual) block by block into `out` (null: only `decoded` is wanted);
// `decoded`, when given, receives the values a peer decodes (n floats, may alias x).
void encode_int8(const float* x, int64_t n, uint8_t* out, float* residual, float* decoded) {
  uint8_t* exponents = out;
  int8_t* q = out ? reinterpret_cast<int8_t*>(out + blocks(n)) : nullptr;
  alignas(64) float v[kInt8Block];
  alignas(64) float back[kInt8Block];
  int8_t block_q[kInt8Block];
  for (int64_t b = 0, begin = 0; begin < n; ++b, begin += kInt8Block) {
    const int64_t len = std::min(kInt8Block, n - begin);
    const float* values = x + begin;
    if (residual) {
      for (int64_t i = 0; i < len; ++i) v[i] = x[begin + i] + residual[begin + i];
      values = v;
    }
    const uint8_t exponent = block_exponent(values, len);
    if (out) exponents[b] = exponent;
    const bool need_back = residual || decoded;
    quantize_block(values, len, exponent, out ? q + begin : block_q, need_back ? back : nullptr);
    if (residual) {
      // A non-finite block keeps no residual: the step that sent it is skipped or stops.
      const bool finite = exponent != kNonFinite;
      for (int64_t i = 0; i < len; ++i) residual[begin + i] = finite ? values[i] - back[i] : 0.0f;
    }
    if (decoded) std::memcpy(decoded + begin, back, static_cast<size_t>(len) * sizeof(float));
  }
}

}  // namespace

int64_t wire_bytes(DType wire, int64_t n) {
  switch (wire) {
    case DType::kF32: return 4 * n;
    case DType::kBF16: return 2 * n;
    case DType::kInt8: return n + blocks(n);
  }
  return 4 * n;
}

void encode(DType wire, const float* x, int64_t n, uint8_t* out, float* residual) {
  switch (wire) {
    case DType::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBF16: {
      Bf16* bits = reinterpret_cast<Bf16*>(out);
      if (!residual) {
        to_bf16(x, bits, n);
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i] + residual[i];
        bits[i] = to_bf16(v);
        residual[i] = v - to_float(bits[i]);
      }
      return;
    }
    case DType::kInt8: encode_int8(x, n, out, residual, nullptr); return;
  }
}

void decode(DType wire, const uint8_t* in, int64_t n, float* out) {
  switch (wire) {
    case DType::kF32: std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::kBF16: to_float(reinterpret_cast<const Bf16*>(in), out, n); return;
    case DType::kInt8: {
      const int8_t* q = reinterpret_cast<const int8_t*>(in + blocks(n));
      for (int64_t b = 0, begin = 0; begin < n; ++b, begin += kInt8Block) {
        dequantize_block(q + begin, std::min(kInt8Block, n - begin), in[b], out + begin);
      }
      return;
    }
  }
}

void add_decoded(DType wire, const uint8_t* in, int64_t n, const float* a, float* dst) {
  switch (wire) {
    case DType::kF32: {
      const float* b = reinterpret_cast<const float*>(in);
      for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
      return;
    }
    case DType::kBF16: {
      const uint16_t* b = reinterpret_cast<const uint16_t*>(in);
      for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + to_float(Bf16{b[i]});
      return;
    }
    case DType::kInt8: {
      const int8_t* q = reinterpret_cast<const int8_t*>(in + blocks(n));
      for (int64_t b = 0, begin = 0; begin < n; ++b, begin += kInt8Block) {
        const int64_t end = std::min(n, begin + kInt8Block);
        if (in[b] == kNonFinite) {
          std::fill(dst + begin, dst + end, std::nanf(""));
          continue;
        }
        const float scale = scale_of(in[b]);
        for (int64_t i = begin; i < end; ++i) dst[i] = a[i] + static_cast<float>(q[i]) * scale;
      }
      return;
    }
  }
}

void round_to_wire(DType wire, float* x, int64_t n, float* residual) {
  switch (wire) {
    case DType::kF32: return;
    case DType::kBF16:
      if (!residual) {
        round_bf16(x, x, n);
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i] + residual[i];
        x[i] = round_bf16(v);
        residual[i] = v - x[i];
      }
      return;
    case DType::kInt8: encode_int8(x, n, nullptr, residual, x); return;
  }
}

float int8_block_error_bound(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return std::max(amax / 127.5f, std::ldexp(1.0f, -128));
}

}  // namespace shardlab
