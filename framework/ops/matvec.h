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

#include "framework/ops/bf16.h"
#include "framework/tensor.h"

namespace shardlab {

// The most rows ops::linear multiplies with matvec (fp32); above it oneDNN's GEMM is as
// fast or faster (measured: docs/performance.md, the decode section).
constexpr int64_t kMatvecMaxRows = 8;

// y[M, N] = x[M, K] · w[N, K]^T (+ bias[N] when bias is not null); all row-major, fp32.
void matvec(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K);

// The most rows ops::linear multiplies from a weight's fp32 MatvecPanels. A prompt's
// prefill has B x T rows of a shape that oneDNN has seldom seen: its first GEMM of a shape
// JIT-compiles kernels (the decode benchmark's first prefill of 256 rows took 158 ms
// through oneDNN against 59 predicted), where the panels need nothing new and, warm, run
// at oneDNN's rate or above up to here (bench_decode_products, the 25 weights of
// docs/performance.md's decode model, 2 threads: 256 rows 378 GFLOP/s, 512 375, 1024 366;
// oneDNN warm 344 at 256 rows). Past it each row block re-reads more of x than the caches
// hold, and oneDNN takes over.
constexpr int64_t kMatvecPanelsMaxRows = 1024;
// The same for bf16 panels: they widen to fp32 FMAs (327 GFLOP/s at 128-256 rows), where
// oneDNN's bf16 kernels, on a CPU that has them, run twice the fp32 rate once compiled.
constexpr int64_t kMatvecPanelsMaxRowsBf16 = 128;

// A weight w[N, K] laid out for the decode step: 16-column panels, [ceil(N/16)][K][16] (the
// columns past N zero), in fp32 or bf16. A panel is one contiguous stream of K x 16 values
// that the hardware prefetcher follows, where w's own rows are N short streams of K values
// each; every output is one FMA chain over k in order (no lanes to sum), so a row's result
// depends neither on the other rows nor on the thread count. Measured here (1 thread, the
// decode benchmark's 170 MB of weights, docs/performance.md): 1 row 40 GB/s against
// matvec's 25-30, 8 rows 28 GB/s against 14.
//
//   const MatvecPanels panels(w.data(), N, K, /*bf16=*/false);   // once, after loading
//   panels.multiply(x, bias, y, M);                              // y = x w^T + bias
//
// bf16 panels hold w rounded to bf16 (half the bytes read per token) and multiply x
// rounded to bf16, accumulating in fp32: bf16 operands, fp32 accumulation, as every bf16
// matmul (framework/precision.h).
class MatvecPanels {
 public:
  MatvecPanels(const float* w, int64_t N, int64_t K, bool bf16);

  // y[M, N] = x[M, K] w^T (+ bias[N] when bias is not null), any M (rows go eight at a time).
  void multiply(const float* x, const float* bias, float* y, int64_t M) const;

  int64_t rows() const { return n_; }  // N
  int64_t cols() const { return k_; }  // K
  bool bf16() const { return bf16_; }
  int64_t bytes() const;

 private:
  int64_t n_ = 0, k_ = 0, panels_ = 0;
  bool bf16_ = false;
  Tensor f32_;       // fp32 panels
  Bf16Array bf16s_;  // bf16 panels
};

}  // namespace shardlab
