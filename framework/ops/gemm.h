// Matrix multiplication through oneDNN's matmul primitive: the kernel every matmul-shaped
// op runs (framework/ops/matmul.h, attention, the experts' grouped GEMMs).
//
// `matmul_raw` computes C = alpha * (op(A) * op(B) (+ bias)) (+ C), where each operand is a
// strided view of up to four dims (two leading batch dims, then rows and columns). Strides
// let callers read transposes and heads straight out of a fused [B, T, 3, N, H] buffer
// without copying. Primitives are created once per (shapes, strides, flags) and cached;
// creating one costs far more than running a small matmul. Calls come from one thread at
// a time (the cache is not locked); a large 2-d call may run on every OpenMP thread (the
// thread split, below).
#pragma once

#include <array>
#include <cstdint>

#include "framework/ops/bf16.h"

namespace shardlab {

// A strided 4-d view: dims {b0, b1, rows, cols}; unused batch dims have size 1.
struct MatView {
  std::array<int64_t, 4> dims{1, 1, 1, 1};
  std::array<int64_t, 4> strides{0, 0, 0, 1};

  // Row-major [rows, cols] with leading dimension ld (>= cols); transposed when `trans`.
  static MatView matrix(int64_t rows, int64_t cols, int64_t ld, bool trans = false);
  // Batched: b0 x b1 matrices [rows, cols] with the given strides for each dim.
  static MatView batched(std::array<int64_t, 4> dims, std::array<int64_t, 4> strides);
  int64_t rows() const { return dims[2]; }
  int64_t cols() const { return dims[3]; }
};

struct MatmulFlags {
  float alpha = 1.0f;
  bool accumulate = false;  // C += result instead of C = result
  bool bias = false;        // add a [cols] bias row to every row of C
};

void matmul_raw(const float* a, const MatView& av, const float* b, const MatView& bv, float* c,
                const MatView& cv, MatmulFlags flags = {}, const float* bias = nullptr);

// The same with bf16 operands: oneDNN's bf16 kernel, fp32 accumulation and output.
void matmul_raw(const Bf16* a, const MatView& av, const Bf16* b, const MatView& bv, float* c, const MatView& cv,
                MatmulFlags flags = {}, const float* bias = nullptr);

// Number of oneDNN matmul primitives created so far (cache misses).
int64_t matmul_primitives_created();

// Thread split. With more than one OpenMP thread, a 2-d matmul (no batch dims) with at least
// 256 rows or 256 reduction steps per thread runs as one oneDNN call per thread on its own
// share: a block of C's rows, or, where the reduction is longer than C has rows (a weight
// gradient), a slice of the reduction whose partial products are added in thread order
// (while those partial products, one [rows, cols] per thread but the first, fit in 16 MiB).
// Results equal the single call's within fp32 rounding (bitwise on integer-valued data).
// On by default; off leaves the partition to oneDNN (bench_train_step --matmul-split off).
void set_matmul_thread_split(bool on);
// Number of matmuls run split so far.
int64_t thread_split_matmuls();

}  // namespace shardlab
