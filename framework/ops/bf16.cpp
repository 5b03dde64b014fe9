#include "framework/ops/bf16.h"

#include "framework/precision.h"
#include "framework/tensor.h"

namespace shardlab {
namespace {
// Below this many elements a conversion stays on one thread.
constexpr int64_t kParallelAbove = 1 << 15;
}  // namespace

void to_bf16(const float* in, Bf16* out, int64_t n) {
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
#pragma omp parallel for simd if (n > kParallelAbove) schedule(static)
  for (int64_t i = 0; i < n; ++i) o[i] = to_bf16(in[i]).bits;
}

void to_float(const Bf16* in, float* out, int64_t n) {
  const uint16_t* b = reinterpret_cast<const uint16_t*>(in);
#pragma omp parallel for simd if (n > kParallelAbove) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(b[i]) << 16);
}

void round_bf16(const float* in, float* out, int64_t n) {
#pragma omp parallel for simd if (n > kParallelAbove) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = round_bf16(in[i]);
}

Tensor rounded_to_bf16(const Tensor& x) {
  Tensor r = Tensor::empty(x.shape());
  round_bf16(x.data(), r.data(), x.numel());
  return r;
}

Tensor compute_value(const Tensor& p) {
  return !p.defined() || !compute_precision().bf16() ? p : rounded_to_bf16(p);
}

Bf16Array::Bf16Array(int64_t n)
    : storage_(std::make_shared<Storage>((n + 1) / 2)),
      data_(reinterpret_cast<Bf16*>(storage_->data())),
      numel_(n) {}

Bf16Array Bf16Array::of(const float* values, int64_t n) {
  Bf16Array a(n);
  to_bf16(values, a.data_, n);
  return a;
}

}  // namespace shardlab
