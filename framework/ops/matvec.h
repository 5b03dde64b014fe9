// Matrix-vector products for a few rows: the decode step's weight multiplications.
//
// At decode a linear layer multiplies a handful of rows (one token per sequence) by a
// weight that is read from memory once per step, so its time is the weight's bytes over
// the memory bandwidth. oneDNN's matmul runs such a product at about half that rate on
// this machine's fp32 weights (its GEMM packs and blocks for large M); `matvec` streams
// every weight row once, multiplying it with all the rows at the same time, and each
// output is a dot product summed in one fixed order: a row's result does not depend on
// how many other rows are multiplied with it, nor on the number of threads.
//
//   if (M <= kMatvecMaxRows) matvec(x, w, bias, y, M, N, K);   // y[M,N] = x[M,K] w[N,K]^T + bias[N]
#pragma once

#include <cstdint>

namespace shardlab {

// The most rows ops::linear multiplies with matvec (fp32); above it oneDNN's GEMM is as
// fast or faster (measured: docs/performance.md, the decode section).
constexpr int64_t kMatvecMaxRows = 8;

// y[M, N] = x[M, K] · w[N, K]^T (+ bias[N] when bias is not null); all row-major, fp32.
void matvec(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K);

}  // namespace shardlab
