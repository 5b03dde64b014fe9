#include "framework/ops/norm.h"

#include <omp.h>

#include <cmath>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/bf16.h"

namespace shardlab::ops {
namespace {

void check_norm_shapes(const char* op, const Tensor& x, const Tensor& w) {
  SL_ASSERT(w.ndim() == 1 && x.dim(-1) == w.dim(0),
            std::string(op) + ": x " + shape_str(x.shape()) + " with weight " + shape_str(w.shape()));
}

// Per-thread [D] partial sums, added in thread order so results are deterministic
// (an `omp critical` sum would depend on which thread finishes first).
class ThreadPartials {
 public:
  ThreadPartials(int64_t D) : D_(D), sums_(static_cast<size_t>(omp_get_max_threads()) * D, 0.0f) {}
  float* mine() { return sums_.data() + static_cast<size_t>(omp_get_thread_num()) * D_; }
  std::vector<float> total() const {
    std::vector<float> out(D_, 0.0f);
    for (size_t t = 0; t < sums_.size() / D_; ++t)
      for (int64_t j = 0; j < D_; ++j) out[j] += sums_[t * D_ + j];
    return out;
  }

 private:
  int64_t D_;
  std::vector<float> sums_;
};

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps) {
  check_norm_shapes("layer_norm", x, w);
  const int64_t D = x.dim(-1), rows = x.numel() / D;
  Tensor y = Tensor::empty(x.shape());
  Tensor mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});
  const Tensor wc = compute_value(w), bc = compute_value(b);  // bf16 values under bf16
  const float *px = x.data(), *pw = wc.data(), *pb = bc.data();
  float *py = y.data(), *pm = mean.data(), *pr = rstd.data();
#pragma omp parallel for if (rows > 64)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * D;
    float m = 0.0f, v = 0.0f;
#pragma omp simd reduction(+ : m)
    for (int64_t j = 0; j < D; ++j) m += xr[j];
    m /= D;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < D; ++j) v += (xr[j] - m) * (xr[j] - m);
    float s = 1.0f / std::sqrt(v / D + eps);
    pm[r] = m;
    pr[r] = s;
#pragma omp simd
    for (int64_t j = 0; j < D; ++j) py[r * D + j] = (xr[j] - m) * s * pw[j] + pb[j];
  }
  return record(y, "layer_norm", {x, w, b}, [x, wc, mean, rstd, D, rows](const Tensor& gy) {
    Tensor gx = Tensor::empty(x.shape());
    ThreadPartials gw(D), gb(D);
    const float *px = x.data(), *pw = wc.data(), *g = gy.data(), *pm = mean.data(), *pr = rstd.data();
    float* ox = gx.data();
#pragma omp parallel
    {
      float *lw = gw.mine(), *lb = gb.mine();
      std::vector<float> xhat(D), gxh(D);
#pragma omp for
      for (int64_t r = 0; r < rows; ++r) {
        const float *xr = px + r * D, *gr = g + r * D;
        const float m = pm[r], s = pr[r];
        float a = 0.0f, c = 0.0f;
        float *xh = xhat.data(), *gh = gxh.data();
#pragma omp simd reduction(+ : a, c)
        for (int64_t j = 0; j < D; ++j) {
          xh[j] = (xr[j] - m) * s;
          gh[j] = gr[j] * pw[j];
          lw[j] += gr[j] * xh[j];
          lb[j] += gr[j];
          a += gh[j];
          c += gh[j] * xh[j];
        }
        a /= D;
        c /= D;
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) ox[r * D + j] = s * (gh[j] - a - xh[j] * c);
      }
    }
    return std::vector<Tensor>{gx, Tensor::from({D}, gw.total()), Tensor::from({D}, gb.total())};
  });
}

Tensor rms_norm(const Tensor& x, const Tensor& w, float eps) {
  check_norm_shapes("rms_norm", x, w);
  const int64_t D = x.dim(-1), rows = x.numel() / D;
  Tensor y = Tensor::empty(x.shape());
  Tensor rstd = Tensor::empty({rows});
  const Tensor wc = compute_value(w);  // bf16 values under bf16
  const float *px = x.data(), *pw = wc.data();
  float *py = y.data(), *pr = rstd.data();
#pragma omp parallel for if (rows > 64)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * D;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < D; ++j) ss += xr[j] * xr[j];
    float s = 1.0f / std::sqrt(ss / D + eps);
    pr[r] = s;
#pragma omp simd
    for (int64_t j = 0; j < D; ++j) py[r * D + j] = xr[j] * s * pw[j];
  }
  return record(y, "rms_norm", {x, w}, [x, wc, rstd, D, rows](const Tensor& gy) {
    Tensor gx = Tensor::empty(x.shape());
    ThreadPartials gw(D);
    const float *px = x.data(), *pw = wc.data(), *g = gy.data(), *pr = rstd.data();
    float* ox = gx.data();
#pragma omp parallel
    {
      float* lw = gw.mine();
#pragma omp for
      for (int64_t r = 0; r < rows; ++r) {
        const float *xr = px + r * D, *gr = g + r * D;
        const float s = pr[r];
        float c = 0.0f;
#pragma omp simd reduction(+ : c)
        for (int64_t j = 0; j < D; ++j) {
          lw[j] += gr[j] * xr[j] * s;
          c += gr[j] * pw[j] * xr[j];
        }
        c *= s * s * s / D;
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) ox[r * D + j] = gr[j] * pw[j] * s - xr[j] * c;
      }
    }
    return std::vector<Tensor>{gx, Tensor::from({D}, gw.total())};
  });
}

}  // namespace shardlab::ops
