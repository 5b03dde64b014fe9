// Matmul operands and the autograd ops built on matmuls (framework/ops/gemm.h runs them).
//
// `linear` is the autograd op: y[..., N] = x[..., K] · w[N, K]^T + b[N] (PyTorch layout).
//
// Every op here multiplies in the thread's compute precision (framework/precision.h):
// under bf16 its operands are converted to bf16 for the matmul, the accumulation and the
// output are fp32; backward converts the saved fp32 inputs again (the autograd graph keeps
// them alive anyway, so a bf16 copy kept beside them would only add memory) and the output
// gradient too, and accumulates into fp32 gradients.
#pragma once

#include <cstdint>

#include "framework/ops/bf16.h"
#include "framework/ops/gemm.h"
#include "framework/precision.h"
#include "framework/tensor.h"

namespace shardlab {

// A matmul operand as a precision multiplies it: the fp32 values themselves (fp32), a bf16
// copy (bf16, native kernels) or a bf16-rounded fp32 copy (bf16, rounded path). Cheap to
// copy; it keeps its values alive. A weight with a live ComputeCopies copy
// (compute_copies.h) takes that copy instead of being converted again. linear,
// batched_linear, matmul and causal_attention keep their inputs for backward in this form,
// so under bf16 a saved activation takes half the bytes and is converted once.
class MatmulOperand {
 public:
  MatmulOperand() = default;
  MatmulOperand(const Tensor& x, const ComputePrecision& precision);
  // An operand of n elements that its owner fills (attention's probabilities), stored as
  // `precision` multiplies it: bf16 under oneDNN's bf16 kernels (write through bf16()),
  // else fp32 (write through f32(), values rounded to bf16 where rounded() says so).
  static MatmulOperand allocate(int64_t n, const ComputePrecision& precision);
  float* f32() { return f32_.defined() ? f32_.data() : nullptr; }
  const float* f32() const { return f32_.defined() ? f32_.data() : nullptr; }
  Bf16* bf16() const { return bf16_.data(); }
  bool rounded() const { return rounded_; }
  // Operands of a precision's matmuls, at element `offset` of their buffers.
  friend void matmul_raw(const MatmulOperand& a, int64_t a_offset, const MatView& av, const MatmulOperand& b,
                         int64_t b_offset, const MatView& bv, float* c, const MatView& cv, MatmulFlags flags,
                         const float* bias);

 private:
  Tensor f32_;            // fp32 or rounded values
  Bf16Array bf16_;        // native bf16
  bool rounded_ = false;  // f32_ holds bf16-rounded values
};

void matmul_raw(const MatmulOperand& a, int64_t a_offset, const MatView& av, const MatmulOperand& b, int64_t b_offset,
                const MatView& bv, float* c, const MatView& cv, MatmulFlags flags = {}, const float* bias = nullptr);

// Number of ops::linear multiplications so far (linear_with_output does not multiply):
// shows what rematerialisation recomputes.
int64_t linear_forwards();

namespace ops {

// y[..., N] = x[..., K] · w[N, K]^T (+ b[N]). b may be undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// The same op when its output y is already known (computed earlier and saved, as
// selective rematerialisation does): records linear's backward without multiplying.
Tensor linear_with_output(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y);
// The same with x kept as `xs`, its operand in this thread's precision: backward reads xs,
// never x's values (x may be Tensor::unallocated, a shape that receives the gradient).
Tensor linear_with_output(const Tensor& x, const MatmulOperand& xs, const Tensor& w, const Tensor& b, const Tensor& y);

// G linear layers at once (the experts of an MoE layer: a grouped GEMM):
// y[g, M, N] = x[g, M, K] · w[g, N, K]^T (+ b[g, N]). b may be undefined.
Tensor batched_linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// c[..., M, N] = a[..., M, K] · b[..., K, N] with equal leading dims (at most two).
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace ops
}  // namespace shardlab
