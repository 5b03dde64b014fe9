#include "framework/ops/matmul.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/compute_copies.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/matvec.h"

namespace shardlab {
namespace {

std::atomic<int64_t> g_bf16_matmuls[2] = {0, 0};

}  // namespace

int64_t bf16_matmuls(Bf16Matmul path) { return g_bf16_matmuls[static_cast<int>(path)].load(); }

MatmulOperand::MatmulOperand(const Tensor& x, const ComputePrecision& precision) {
  if (const MatmulOperand* copy = ComputeCopies::find(x, precision)) {  // a weight converted once
    *this = *copy;
  } else if (!precision.bf16()) {
    f32_ = x;
  } else if (precision.matmul == Bf16Matmul::kNative) {
    bf16_ = Bf16Array::of(x.data(), x.numel());
  } else {
    f32_ = rounded_to_bf16(x);
    rounded_ = true;
  }
}

MatmulOperand MatmulOperand::allocate(int64_t n, const ComputePrecision& precision) {
  MatmulOperand operand;
  if (precision.bf16() && precision.matmul == Bf16Matmul::kNative) {
    operand.bf16_ = Bf16Array(n);
  } else {
    operand.f32_ = Tensor::empty({n});
    operand.rounded_ = precision.bf16();
  }
  return operand;
}

void matmul_raw(const MatmulOperand& a, int64_t a_offset, const MatView& av, const MatmulOperand& b, int64_t b_offset,
                const MatView& bv, float* c, const MatView& cv, MatmulFlags flags, const float* bias) {
  SL_ASSERT(a.bf16_.defined() == b.bf16_.defined() && a.rounded_ == b.rounded_,
            "matmul operands of different precisions");
  if (a.bf16_.defined()) {
    g_bf16_matmuls[static_cast<int>(Bf16Matmul::kNative)].fetch_add(1, std::memory_order_relaxed);
    matmul_raw(a.bf16_.data() + a_offset, av, b.bf16_.data() + b_offset, bv, c, cv, flags, bias);
  } else {
    if (a.rounded_) g_bf16_matmuls[static_cast<int>(Bf16Matmul::kRounded)].fetch_add(1, std::memory_order_relaxed);
    matmul_raw(a.f32_.data() + a_offset, av, b.f32_.data() + b_offset, bv, c, cv, flags, bias);
  }
}

namespace {
std::atomic<int64_t> g_linear_forwards{0};
}  // namespace

int64_t linear_forwards() { return g_linear_forwards.load(std::memory_order_relaxed); }

namespace ops {

namespace {

void check_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  SL_ASSERT(w.ndim() == 2 && x.dim(-1) == w.dim(1),
            "linear: x " + shape_str(x.shape()) + " with weight " + shape_str(w.shape()));
  SL_ASSERT(!b.defined() || (b.ndim() == 1 && b.dim(0) == w.dim(0)), "linear: bias shape");
}

// Records linear's backward on its output y. Backward keeps x as the forward multiplied it
// (`xs`: x itself in fp32, its bf16 copy under bf16), never x's fp32 values beside a copy:
// under bf16 a Linear's saved input takes half the bytes, and backward converts it no more.
Tensor record_linear(const Tensor& x, const MatmulOperand& xs, const Tensor& w, const Tensor& b, Tensor y,
                     const ComputePrecision& precision) {
  const int64_t K = w.dim(1), N = w.dim(0), M = x.numel() / K;
  return record(y, "linear", {x, w, b}, [xs, x_shape = x.shape(), x_grad = x.requires_grad(), w, b, M, N, K,
                                         precision](const Tensor& gy) {
    Tensor gx, gw, gb;
    const MatmulOperand go(gy, precision);
    if (x_grad) {  // gx[M,K] = gy[M,N] · w[N,K]
      gx = Tensor::empty(x_shape);
      matmul_raw(go, 0, MatView::matrix(M, N, N), MatmulOperand(w, precision), 0, MatView::matrix(N, K, K), gx.data(),
                 MatView::matrix(M, K, K));
    }
    const auto weight_grad_of = [=](const MatmulOperand& g_y) {  // gw[N,K] = gy^T[N,M] · x[M,K]
      Tensor g = Tensor::empty(w.shape());
      matmul_raw(g_y, 0, MatView::matrix(N, M, N, true), xs, 0, MatView::matrix(M, K, K), g.data(),
                 MatView::matrix(N, K, K));
      return g;
    };
    // Deferred, it converts gy again when it runs rather than keep a converted copy waiting.
    const auto weight_grad = [=] { return weight_grad_of(MatmulOperand(gy, precision)); };
    const auto bias_grad = [=] {  // gb[N] = column sums of gy (fp32)
      Tensor g = Tensor::empty(b.shape());
      column_sums(gy.data(), M, N, g.data());
      return g;
    };
    // A zero-bubble pipeline's input-gradient pass leaves the weight's for later.
    if (w.requires_grad() && !defer_gradient(w, weight_grad)) gw = weight_grad_of(go);
    if (b.defined() && b.requires_grad() && !defer_gradient(b, bias_grad)) gb = bias_grad();
    return std::vector<Tensor>{gx, gw, gb};
  });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_linear(x, w, b);
  const int64_t K = w.dim(1), N = w.dim(0), M = x.numel() / K;
  Shape out_shape = x.shape();
  out_shape.back() = N;
  Tensor y = Tensor::empty(out_shape);
  const ComputePrecision precision = compute_precision();
  const Tensor bias = compute_value(b);
  const int64_t panel_rows = precision.bf16() ? kMatvecPanelsMaxRowsBf16 : kMatvecPanelsMaxRows;
  const MatvecPanels* panels = M <= panel_rows ? ComputeCopies::find_panels(w, precision) : nullptr;
  const bool gemm = panels == nullptr && (precision.bf16() || M > kMatvecMaxRows);
  // x as the GEMM multiplies it and backward keeps it; a decode step without autograd
  // needs neither (under bf16 that saves converting x on every call).
  const MatmulOperand xs = gemm || needs_grad({&x, &w, &b}) ? MatmulOperand(x, precision) : MatmulOperand();
  if (panels != nullptr) {  // a decode step's rows (or a short prefill's), the weight laid out for them
    panels->multiply(x.data(), b.defined() ? bias.data() : nullptr, y.data(), M);
  } else if (!gemm) {  // a few fp32 rows: stream the weight once
    matvec(x.data(), w.data(), b.defined() ? bias.data() : nullptr, y.data(), M, N, K);
  } else {
    matmul_raw(xs, 0, MatView::matrix(M, K, K), MatmulOperand(w, precision), 0, MatView::matrix(K, N, K, /*trans=*/true),
               y.data(), MatView::matrix(M, N, N), {.bias = b.defined()}, b.defined() ? bias.data() : nullptr);
  }
  g_linear_forwards.fetch_add(1, std::memory_order_relaxed);
  return record_linear(x, xs, w, b, y, precision);
}

Tensor linear_with_output(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  return linear_with_output(x, needs_grad({&x, &w, &b}) ? MatmulOperand(x, compute_precision()) : MatmulOperand(), w, b,
                            y);
}

Tensor linear_with_output(const Tensor& x, const MatmulOperand& xs, const Tensor& w, const Tensor& b, const Tensor& y) {
  check_linear(x, w, b);
  SL_ASSERT(y.numel() == x.numel() / w.dim(1) * w.dim(0), "linear_with_output: output " + shape_str(y.shape()) +
                                                              " does not match x " + shape_str(x.shape()) + " and weight " +
                                                              shape_str(w.shape()));
  return record_linear(x, xs, w, b, y.detach(), compute_precision());
}

Tensor batched_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  SL_ASSERT(x.ndim() == 3 && w.ndim() == 3 && x.dim(0) == w.dim(0) && x.dim(2) == w.dim(2),
            "batched_linear: x " + shape_str(x.shape()) + " with weights " + shape_str(w.shape()));
  SL_ASSERT(!b.defined() || (b.ndim() == 2 && b.dim(0) == w.dim(0) && b.dim(1) == w.dim(1)),
            "batched_linear: bias " + shape_str(b.shape()) + " for weights " + shape_str(w.shape()));
  const int64_t G = x.dim(0), M = x.dim(1), K = x.dim(2), N = w.dim(1);
  // [1, G, rows, cols] views, row-major or transposed.
  auto view = [G](int64_t rows, int64_t cols, bool trans) {
    return MatView::batched({1, G, rows, cols}, {G * rows * cols, rows * cols, trans ? 1 : cols, trans ? rows : 1});
  };
  Tensor y = Tensor::empty({G, M, N});
  const ComputePrecision precision = compute_precision();
  const MatmulOperand xs(x, precision);  // kept for backward as multiplied (record_linear says why)
  matmul_raw(xs, 0, view(M, K, false), MatmulOperand(w, precision), 0, view(K, N, true), y.data(), view(M, N, false));
  if (b.defined()) {
    const Tensor bc = compute_value(b);
    for (int64_t g = 0; g < G; ++g) {
      const float* bias = bc.data() + g * N;
      for (int64_t m = 0; m < M; ++m) {
        float* row = y.data() + (g * M + m) * N;
#pragma omp simd
        for (int64_t n = 0; n < N; ++n) row[n] += bias[n];
      }
    }
  }
  return record(y, "batched_linear", {x, w, b}, [xs, x_shape = x.shape(), x_grad = x.requires_grad(), w, b, G, M, N, K,
                                                 view, precision](const Tensor& gy) {
    Tensor gx, gw, gb;
    const MatmulOperand go(gy, precision);
    if (x_grad) {  // gx[g] = gy[g] · w[g]
      gx = Tensor::empty(x_shape);
      matmul_raw(go, 0, view(M, N, false), MatmulOperand(w, precision), 0, view(N, K, false), gx.data(),
                 view(M, K, false));
    }
    if (w.requires_grad()) {  // gw[g] = gy[g]^T · x[g]
      gw = Tensor::empty(w.shape());
      matmul_raw(go, 0, view(N, M, true), xs, 0, view(M, K, false), gw.data(), view(N, K, false));
    }
    if (b.defined() && b.requires_grad()) {  // gb[g] = column sums of gy[g]
      gb = Tensor::empty(b.shape());
      for (int64_t g = 0; g < G; ++g) column_sums(gy.data() + g * M * N, M, N, gb.data() + g * N);
    }
    return std::vector<Tensor>{gx, gw, gb};
  });
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  SL_ASSERT(a.ndim() == b.ndim() && a.ndim() >= 2 && a.ndim() <= 4 && a.dim(-1) == b.dim(-2),
            "matmul: " + shape_str(a.shape()) + " x " + shape_str(b.shape()));
  for (int i = 0; i + 2 < a.ndim(); ++i) {
    SL_ASSERT(a.dim(i) == b.dim(i), "matmul batch dims: " + shape_str(a.shape()) + " x " + shape_str(b.shape()));
  }
  const int64_t M = a.dim(-2), K = a.dim(-1), N = b.dim(-1);
  const int64_t batch = a.numel() / (M * K);
  Shape out_shape = a.shape();
  out_shape.back() = N;
  Tensor c = Tensor::empty(out_shape);
  // Views as [1, batch, rows, cols] with the given per-matrix transposition.
  auto view = [batch](int64_t rows, int64_t cols, bool trans) {
    return MatView::batched({1, batch, rows, cols}, {batch * rows * cols, rows * cols, trans ? 1 : cols, trans ? rows : 1});
  };
  const ComputePrecision precision = compute_precision();
  const MatmulOperand as(a, precision), bs(b, precision);  // kept for backward as multiplied
  matmul_raw(as, 0, view(M, K, false), bs, 0, view(K, N, false), c.data(), view(M, N, false));
  return record(c, "matmul", {a, b}, [as, bs, a_shape = a.shape(), b_shape = b.shape(), a_grad = a.requires_grad(),
                                      b_grad = b.requires_grad(), M, N, K, view, precision](const Tensor& gc) {
    Tensor ga, gb;
    const MatmulOperand go(gc, precision);
    if (a_grad) {  // ga[M,K] = gc[M,N] · b^T[N,K]
      ga = Tensor::empty(a_shape);
      matmul_raw(go, 0, view(M, N, false), bs, 0, view(N, K, true), ga.data(), view(M, K, false));
    }
    if (b_grad) {  // gb[K,N] = a^T[K,M] · gc[M,N]
      gb = Tensor::empty(b_shape);
      matmul_raw(as, 0, view(K, M, true), go, 0, view(M, N, false), gb.data(), view(K, N, false));
    }
    return std::vector<Tensor>{ga, gb};
  });
}

}  // namespace ops
}  // namespace shardlab
