// Vectorisable float exp and sigmoid for the elementwise ops, and the one row softmax
// that softmax, causal attention and cross-entropy share.
//
// glibc's expf/tanhf are scalar calls that a loop cannot vectorise without -ffast-math;
// in a training step they cost more than all of GELU's matmul neighbours together. These
// are plain inline arithmetic, so a `#pragma omp simd` loop turns them into AVX-512 code:
//
//   #pragma omp simd
//   for (int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i]);
//
// fast_exp is Cephes' expf (relative error about 2e-7 on [-87, 88]); inputs are clamped
// to that range, so it never returns inf or a denormal and never NaN for a finite input.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace shardlab::ops {

inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // n = round(x / ln2) by the 1.5 * 2^23 trick (std::floor does not vectorise without
  // -fno-trapping-math); then x = n ln2 + r with |r| <= ln2 / 2.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 split in two for exactness
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

// The row's max m and normaliser z = sum exp(x - m): log softmax(x)[j] = x[j] - m - log(z).
struct SoftmaxStats {
  float max;
  float sum;
};

// The largest of m and x[0, n). A select, not std::max: GCC 12 vectorises the reduction
// only in this form (std::max's stayed a scalar loop, 45% of the softmax's time in
// gpt-bench's attention).
inline float max_of(float m, const float* x, int64_t n) {
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// out[0, n) = softmax(in[0, n)) for n >= 1; out may equal in.
//
//   const SoftmaxStats st = softmax_row(logits, probs, V);
inline SoftmaxStats softmax_row(const float* in, float* out, int64_t n) {
  const float m = max_of(in[0], in + 1, n - 1);
  float z = 0.0f;
#pragma omp simd reduction(+ : z)
  for (int64_t j = 0; j < n; ++j) z += (out[j] = fast_exp(in[j] - m));
  const float inv = 1.0f / z;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] *= inv;
  return {m, z};
}

}  // namespace shardlab::ops
