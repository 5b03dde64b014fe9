// bfloat16: the upper half of a float32 (sign, 8-bit exponent, 7 stored mantissa bits), so
// it covers fp32's range at about 2-3 significant digits. The unit roundoff of
// round-to-nearest-even is u = 2^-8: |round_bf16(x) - x| <= 2^-8 |x|.
//
// Conversions round to nearest, ties to even (what oneDNN, PyTorch and the avx512_bf16
// instructions do); NaN stays NaN. The bulk forms run on OpenMP threads and vectorise.
//
//   Bf16Array xb = Bf16Array::of(x.data(), x.numel());   // half the bytes of x
//   round_bf16(x.data(), r.data(), x.numel());             // fp32 values a bf16 can hold
#pragma once

#include <bit>
#include <cstdint>
#include <memory>

namespace shardlab {

struct Bf16 {
  uint16_t bits = 0;
};

inline Bf16 to_bf16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : rounded >> 16)};
}
inline float to_float(Bf16 value) { return std::bit_cast<float>(static_cast<uint32_t>(value.bits) << 16); }
inline float round_bf16(float value) { return to_float(to_bf16(value)); }

void to_bf16(const float* in, Bf16* out, int64_t n);  // avx512_bf16's instruction where the CPU has it
void to_bf16_portable(const float* in, Bf16* out, int64_t n);  // the formula alone, on any CPU
void to_float(const Bf16* in, float* out, int64_t n);
void round_bf16(const float* in, float* out, int64_t n);  // in == out allowed

class Storage;
class Tensor;

// The values parameter `p` has in this thread's compute precision (framework/precision.h):
// `p` itself under fp32, a bf16-rounded copy (no autograd) under bf16. Ops that read a
// parameter outside a matmul -- a norm's gain and bias, an embedding row, a linear's
// bias -- read it through this, so that under bf16 every parameter enters the
// computation as its bf16 value wherever it lives (FSDP2's param_dtype): gathered in bf16
// or held whole in fp32, every layout computes with the same values.
Tensor compute_value(const Tensor& p);

// A new tensor (no autograd) of x's values rounded to bf16.
Tensor rounded_to_bf16(const Tensor& x);

// n bf16 values in a Storage (so the MemoryTracker counts their bytes): what a matmul
// saves for backward and what travels on the wire in bf16.
class Bf16Array {
 public:
  Bf16Array() = default;
  explicit Bf16Array(int64_t n);
  static Bf16Array of(const float* values, int64_t n);
  bool defined() const { return storage_ != nullptr; }
  int64_t numel() const { return numel_; }
  Bf16* data() const { return data_; }
  void to_float(float* out) const { shardlab::to_float(data_, out, numel_); }

 private:
  std::shared_ptr<Storage> storage_;
  Bf16* data_ = nullptr;
  int64_t numel_ = 0;
};

}  // namespace shardlab
