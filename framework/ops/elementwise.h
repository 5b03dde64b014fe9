// Pointwise ops and reductions.
//
// Binary ops take tensors of equal shape, or a `b` whose shape is a suffix of `a`'s
// (broadcast over a's leading dims, e.g. x[B, T, D] + pos[T, D]).
#pragma once

#include "framework/tensor.h"

namespace shardlab::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, float s);
Tensor gelu(const Tensor& x);  // tanh approximation (GPT-2)
Tensor silu(const Tensor& x);
Tensor swiglu(const Tensor& gate, const Tensor& up);  // silu(gate) * up, fused
Tensor sum(const Tensor& x);                           // scalar
Tensor mean(const Tensor& x);                          // scalar

// out[j] = sum over i of in[i * cols + j]: a bias's or a broadcast operand's gradient.
// Rows are summed in fixed blocks, each in row order, and the blocks in block order, so
// the result has the same bits at any thread count and for any slice of the columns.
// Threads read whole rows (a column-slice order strides through memory a row at a time).
void column_sums(const float* in, int64_t rows, int64_t cols, float* out);

}  // namespace shardlab::ops
