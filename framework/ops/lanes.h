// Sixteen fp32 lanes as one value (GCC's vector extension: one AVX-512 register, or two
// AVX ones on a target without AVX-512), and the one order in which the kernels that sum
// lanes -- the decode step's matvec and its attention over the KV cache -- add them up, so
// that a result never depends on how many others were computed beside it.
//
//   Lanes acc{};
//   for (int64_t i = 0; i < n; i += kLanes) acc += load_lanes(x + i) * load_lanes(y + i);
//   const float dot = sum_lanes(acc);             // lane l with l + 8, l + 4, l + 2, l + 1
//   const Lanes dots = sum_lanes_16(accs);        // sixteen such sums at once, bitwise equal
#pragma once

#include <cstdint>
#include <cstring>

namespace shardlab {

typedef float Lanes __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

inline Lanes load_lanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// s in every lane. Written as a splat, not `Lanes{} + s` (which GCC must compute as an add,
// since 0 + -0.0 is +0.0, and then a register broadcast: two extra instructions on the
// FMA's ports), so that a product with it becomes one FMA reading s with an embedded
// broadcast ({1to16}).
inline Lanes splat_lanes(float s) { return Lanes{s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s}; }

// The lanes' sum as a tree: lane l with l + 8, then l + 4, l + 2, l + 1 (four dependent
// adds, not fifteen).
inline float sum_lanes(const Lanes& v) {
  typedef float Half __attribute__((vector_size(32)));
  typedef float Quarter __attribute__((vector_size(16)));
  const Half h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Quarter q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// Sixteen vectors summed at once by sum_lanes' tree, bitwise equal to it: lane i of the
// result is sum_lanes(v[i]). Each level adds lanes l and l + s of every vector (s = 8, 4,
// 2, 1) and packs two vectors' partial sums into one; the packing leaves the result in
// bit-reversed order, so the inputs are taken in bit-reversed order.
inline Lanes sum_lanes_16(const Lanes* v) {
  const auto by8 = [](Lanes a, Lanes b) {
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  };
  const auto by4 = [](Lanes a, Lanes b) {
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  };
  const auto by2 = [](Lanes a, Lanes b) {
    return __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
           __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  };
  const auto by1 = [](Lanes a, Lanes b) {
    return __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) +
           __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  };
  const Lanes even = by2(by4(by8(v[0], v[8]), by8(v[4], v[12])), by4(by8(v[2], v[10]), by8(v[6], v[14])));
  const Lanes odd = by2(by4(by8(v[1], v[9]), by8(v[5], v[13])), by4(by8(v[3], v[11]), by8(v[7], v[15])));
  return by1(even, odd);
}

}  // namespace shardlab
