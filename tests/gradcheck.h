// Finite-difference gradient check for framework ops.
//
// The op's output y is reduced to L = sum_i y_i * r_i with fixed random r (so every
// output element matters); the analytic gradient comes from one backward pass seeded
// with r, the numeric one from central differences (L(x + e) - L(x - e)) / 2e with L
// summed in double. Inputs are float32, so with e = 1e-2 the truncation error is
// O(e^2 f''') ~ 1e-4 and the rounding error is about 1e-7 * |L| / e ~ 1e-5 for the O(1)
// values used here; the checks use |analytic - numeric| <= 2e-3 + 2e-2 * |numeric|.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "framework/autograd.h"
#include "framework/rng.h"
#include "framework/tensor.h"

namespace shardlab::testing {

inline Tensor random_tensor(const Shape& shape, uint64_t stream, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape);
  Rng rng(1234);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = scale * rng.normal(stream, i);
  return t;
}

inline double weighted_sum(const Tensor& y, const Tensor& r) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * r.data()[i];
  return s;
}

// Checks d(sum(f(inputs) * r))/d(inputs[k]) for every input k.
inline void gradcheck(const std::function<Tensor(std::vector<Tensor>&)>& f, std::vector<Tensor> inputs,
                      float eps = 1e-2f, double atol = 2e-3, double rtol = 2e-2) {
  for (auto& x : inputs) {
    x.set_requires_grad(true);
    x.zero_grad();
  }
  Tensor y = f(inputs);
  Tensor r = random_tensor(y.shape(), 99);
  run_backward(y, r);
  NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    REQUIRE_MESSAGE(x.grad().defined(), "input " << k << " got no gradient");
    int bad = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float saved = x.data()[i];
      x.data()[i] = saved + eps;
      const double up = weighted_sum(f(inputs), r);
      x.data()[i] = saved - eps;
      const double down = weighted_sum(f(inputs), r);
      x.data()[i] = saved;
      const double numeric = (up - down) / (2.0 * eps);
      const double analytic = x.grad().data()[i];
      if (std::abs(analytic - numeric) > atol + rtol * std::abs(numeric) && bad++ < 5) {
        FAIL_CHECK("input " << k << " element " << i << ": analytic " << analytic << " numeric " << numeric);
      }
    }
    CHECK_MESSAGE(bad == 0, bad << " mismatching elements in input " << k);
  }
}

}  // namespace shardlab::testing
