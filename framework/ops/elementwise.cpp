#include "framework/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/fast_math.h"
#include "framework/ops/parallel_chunks.h"

namespace shardlab::ops {
namespace {

// Number of times b repeats inside a (b's shape must be a suffix of a's).
int64_t broadcast_count(const Tensor& a, const Tensor& b) {
  const Shape &sa = a.shape(), &sb = b.shape();
  bool suffix = sb.size() <= sa.size() && std::equal(sb.rbegin(), sb.rend(), sa.rbegin());
  SL_ASSERT(suffix, "cannot broadcast " + shape_str(sb) + " to " + shape_str(sa));
  return a.numel() / std::max<int64_t>(b.numel(), 1);
}

// Sums the `repeat` copies of a b-shaped block inside g (the gradient of a broadcast).
Tensor reduce_to(const Tensor& g, const Shape& b_shape, int64_t repeat) {
  if (repeat == 1) return g;
  Tensor out = Tensor::empty(b_shape);
  column_sums(g.data(), repeat, g.numel() / repeat, out.data());
  return out;
}

// y[r n + i] = f(a[r n + i], b[i]) for r < repeat. Threads split the rows, or the
// elements when b is a's shape (a residual add: one row).
template <typename F>
void broadcast_apply(const float* a, const float* b, float* y, int64_t repeat, int64_t n, F f) {
  if (repeat == 1) {
    parallel_chunks(n, 32768, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) y[i] = f(a[i], b[i]);
    });
    return;
  }
#pragma omp parallel for if (repeat * n > 32768)
  for (int64_t r = 0; r < repeat; ++r) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = f(a[r * n + i], b[i]);
  }
}

template <typename F>
Tensor map(const Tensor& x, F f) {
  Tensor y = Tensor::empty(x.shape());
  const float* in = x.data();
  float* out = y.data();
  const int64_t n = x.numel();
  parallel_chunks(n, 32768, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
  return y;
}

// GELU (tanh form) and its derivative. 0.5 x (1 + tanh u) = x sigmoid(2u), which needs
// one vectorisable exp instead of a scalar tanhf call.
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
inline float gelu_f(float x) { return x * fast_sigmoid(2.0f * kGeluC * (x + 0.044715f * x * x * x)); }
// d/dx = s + 2 x s (1 - s) u'  with s = sigmoid(2u) (since 1 + tanh u = 2s, 1 - tanh^2 u = 4s(1 - s)).
inline float gelu_df(float x) {
  const float s = fast_sigmoid(2.0f * kGeluC * (x + 0.044715f * x * x * x));
  return s + 2.0f * x * s * (1.0f - s) * kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
}

}  // namespace

void column_sums(const float* in, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kRows = 128;   // rows per block: the block order fixes the rounding
  constexpr int64_t kCols = 1024;  // columns per task: a block's running sums stay in L1
  if (rows == 0) {
    std::fill(out, out + cols, 0.0f);
    return;
  }
  const int64_t blocks = (rows + kRows - 1) / kRows, slices = (cols + kCols - 1) / kCols;
  std::vector<float> partial(blocks > 1 ? blocks * cols : 0);
  float* const sums = blocks > 1 ? partial.data() : out;  // [blocks, cols]
#pragma omp parallel for collapse(2) schedule(static) if (rows * cols > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t s = 0; s < slices; ++s) {
      const int64_t r0 = b * kRows, r1 = std::min(rows, r0 + kRows);
      const int64_t c0 = s * kCols, n = std::min(cols, c0 + kCols) - c0;
      float* __restrict acc = sums + b * cols + c0;
      const float* __restrict first = in + r0 * cols + c0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) acc[j] = first[j];
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const float* __restrict row = in + r * cols + c0;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
      }
    }
  }
  if (blocks == 1) return;
#pragma omp parallel for schedule(static) if (blocks * cols > 65536)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t c0 = s * kCols, n = std::min(cols, c0 + kCols) - c0;
    float* __restrict o = out + c0;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) o[j] = sums[c0 + j];
    for (int64_t b = 1; b < blocks; ++b) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) o[j] += sums[b * cols + c0 + j];
    }
  }
}

Tensor add(const Tensor& a, const Tensor& b) {
  const int64_t repeat = broadcast_count(a, b);
  const int64_t n = b.numel();
  Tensor y = Tensor::empty(a.shape());
  broadcast_apply(a.data(), b.data(), y.data(), repeat, n, [](float u, float v) { return u + v; });
  // Keeps no operand: a residual add's inputs are freed once no other backward needs them.
  return record(y, "add", {a, b}, [b_shape = b.shape(), b_grad = b.requires_grad(), repeat](const Tensor& gy) {
    return std::vector<Tensor>{gy, b_grad ? reduce_to(gy, b_shape, repeat) : Tensor()};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const int64_t repeat = broadcast_count(a, b);
  const int64_t n = b.numel();
  Tensor y = Tensor::empty(a.shape());
  broadcast_apply(a.data(), b.data(), y.data(), repeat, n, [](float u, float v) { return u * v; });
  return record(y, "mul", {a, b}, [a, b, repeat, n](const Tensor& gy) {
    Tensor ga, gb;
    const float* g = gy.data();
    if (a.requires_grad()) {
      ga = Tensor::empty(a.shape());
      broadcast_apply(g, b.data(), ga.data(), repeat, n, [](float u, float v) { return u * v; });
    }
    if (b.requires_grad()) {
      gb = Tensor::zeros(b.shape());
      const float* pa = a.data();
      float* o = gb.data();
      for (int64_t r = 0; r < repeat; ++r)
        for (int64_t i = 0; i < n; ++i) o[i] += g[r * n + i] * pa[r * n + i];
    }
    return std::vector<Tensor>{ga, gb};
  });
}

Tensor scale(const Tensor& x, float s) {
  Tensor y = map(x, [s](float v) { return v * s; });
  return record(y, "scale", {x}, [s](const Tensor& gy) {
    return std::vector<Tensor>{map(gy, [s](float v) { return v * s; })};
  });
}

Tensor gelu(const Tensor& x) {
  Tensor y = map(x, [](float v) { return gelu_f(v); });
  return record(y, "gelu", {x}, [x](const Tensor& gy) {
    Tensor gx = Tensor::empty(x.shape());
    const float *in = x.data(), *g = gy.data();
    float* o = gx.data();
    const int64_t n = x.numel();
    parallel_chunks(n, 32768, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) o[i] = g[i] * gelu_df(in[i]);
    });
    return std::vector<Tensor>{gx};
  });
}

Tensor silu(const Tensor& x) {
  Tensor y = map(x, [](float v) { return v * fast_sigmoid(v); });
  return record(y, "silu", {x}, [x](const Tensor& gy) {
    Tensor gx = Tensor::empty(x.shape());
    const float *in = x.data(), *g = gy.data();
    float* o = gx.data();
    const int64_t n = x.numel();
    parallel_chunks(n, 32768, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        float s = fast_sigmoid(in[i]);
        o[i] = g[i] * s * (1.0f + in[i] * (1.0f - s));
      }
    });
    return std::vector<Tensor>{gx};
  });
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  SL_ASSERT(gate.shape() == up.shape(), "swiglu: " + shape_str(gate.shape()) + " vs " + shape_str(up.shape()));
  Tensor y = Tensor::empty(gate.shape());
  const float *pg = gate.data(), *pu = up.data();
  float* py = y.data();
  const int64_t n = y.numel();
  parallel_chunks(n, 32768, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) py[i] = pg[i] * fast_sigmoid(pg[i]) * pu[i];
  });
  return record(y, "swiglu", {gate, up}, [gate, up](const Tensor& gy) {
    Tensor gg = Tensor::empty(gate.shape()), gu = Tensor::empty(up.shape());
    const float *pg = gate.data(), *pu = up.data(), *g = gy.data();
    float *og = gg.data(), *ou = gu.data();
    const int64_t n = gate.numel();
    parallel_chunks(n, 32768, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        float s = fast_sigmoid(pg[i]);
        ou[i] = g[i] * pg[i] * s;
        og[i] = g[i] * pu[i] * s * (1.0f + pg[i] * (1.0f - s));
      }
    });
    return std::vector<Tensor>{gg, gu};
  });
}

Tensor sum(const Tensor& x) {
  double acc = 0.0;
  const float* p = x.data();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) acc += p[i];
  Tensor y = Tensor::full({}, static_cast<float>(acc));
  return record(y, "sum", {x}, [x](const Tensor& gy) {
    return std::vector<Tensor>{Tensor::full(x.shape(), gy.item())};
  });
}

Tensor mean(const Tensor& x) { return scale(sum(x), 1.0f / static_cast<float>(x.numel())); }

}  // namespace shardlab::ops
