// Optimizers against double-precision references, the LR schedule, clipping,
// slice (ZeRO) updates and gradient accumulation.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/memory.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

using namespace shardlab;
using namespace shardlab::optim;

namespace {

Tensor leaf(const Shape& shape, std::vector<float> values) {
  return Tensor::from(shape, std::move(values)).set_requires_grad(true);
}

// Gradient for step s of parameter element i: varied signs and magnitudes.
float grad_value(int step, size_t i) { return std::sin(1.0f + step * 0.7f + i * 1.3f) * (1.0f + i); }

void set_grads(const NamedTensors& params, int step) {
  for (const auto& [name, p] : params) {
    std::vector<float> g(p.numel());
    for (size_t i = 0; i < g.size(); ++i) g[i] = grad_value(step, i);
    Tensor(p).set_grad(Tensor::from(p.shape(), g));
  }
}

NamedTensors two_params() {
  return {{"w", leaf({2, 3}, {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f})}, {"b", leaf({3}, {0.1f, -0.2f, 0.3f})}};
}

void check_close(const Tensor& t, const std::vector<double>& expected) {
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(t.data()[i] == doctest::Approx(expected[i]).epsilon(2e-6));
  }
}

// The optimizer's state as "<kind>/<name>" tensors, in its order.
NamedTensors state_of(const Optimizer& opt) {
  NamedTensors out;
  for (size_t i = 0; i < opt.state().size(); ++i) out.emplace_back(opt.state_name(i), opt.state()[i].tensor);
  return out;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace

TEST_CASE("AdamW matches a double-precision reference; decay skips what the predicate skips") {
  NamedTensors params = two_params();
  const AdamWOptions options{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  AdamW opt(tensor_parameters(params), options);
  std::vector<std::vector<double>> p, m, v;
  for (const auto& [name, t] : params) {
    p.emplace_back(t.data(), t.data() + t.numel());
    m.emplace_back(t.numel(), 0.0);
    v.emplace_back(t.numel(), 0.0);
  }
  const double lrs[] = {1e-2, 5e-3, 2e-2};
  for (int step = 1; step <= 3; ++step) {
    set_grads(params, step);
    opt.step(static_cast<float>(lrs[step - 1]));
    const double lr = static_cast<float>(lrs[step - 1]);
    for (size_t k = 0; k < params.size(); ++k) {
      const bool decays = k == 0;  // the matrix, not the bias
      for (size_t i = 0; i < p[k].size(); ++i) {
        const double g = grad_value(step, i);
        if (decays) p[k][i] *= 1.0 - lr * 0.1;
        m[k][i] = 0.9 * m[k][i] + 0.1 * g;
        v[k][i] = 0.95 * v[k][i] + 0.05 * g * g;
        const double m_hat = m[k][i] / (1.0 - std::pow(0.9, step)), v_hat = v[k][i] / (1.0 - std::pow(0.95, step));
        p[k][i] -= lr * m_hat / (std::sqrt(v_hat) + 1e-8);
      }
    }
  }
  CHECK(opt.step_count() == 3);
  check_close(params[0].second, p[0]);
  check_close(params[1].second, p[1]);
  const NamedTensors state = state_of(opt);
  REQUIRE(state.size() == 4);
  CHECK(state[0].first == "m/w");
  CHECK(state[1].first == "v/w");
  CHECK(state[3].first == "v/b");
  check_close(state[2].second, m[1]);
  check_close(state[3].second, v[1]);
}

TEST_CASE("SGD with momentum matches a double-precision reference") {
  NamedTensors params = two_params();
  SGD opt(tensor_parameters(params), {.momentum = 0.9f});
  std::vector<double> p(params[0].second.data(), params[0].second.data() + 6), buf(6, 0.0);
  for (int step = 1; step <= 3; ++step) {
    set_grads(params, step);
    opt.step(0.05f);
    for (size_t i = 0; i < 6; ++i) {
      buf[i] = static_cast<double>(0.9f) * buf[i] + grad_value(step, i);
      p[i] -= static_cast<double>(0.05f) * buf[i];
    }
  }
  check_close(params[0].second, p);
  CHECK(state_of(opt).size() == 2);
  CHECK(state_of(opt)[0].first == "momentum/w");

  NamedTensors plain = two_params();
  SGD no_momentum(tensor_parameters(plain), {});
  CHECK(state_of(no_momentum).empty());
  set_grads(plain, 1);
  no_momentum.step(0.5f);
  CHECK(plain[1].second.data()[2] == doctest::Approx(0.3 - 0.5 * grad_value(1, 2)).epsilon(1e-6));
  CHECK_THROWS_AS(SGD(tensor_parameters(two_params()), {.momentum = 1.0f}), UserError);
}

TEST_CASE("optimizer state lives under the optimizer memory category and reloads exactly") {
  const int64_t before = MemoryTracker::live(MemoryCategory::Optimizer);
  NamedTensors a_params = two_params();
  auto a = std::make_unique<AdamW>(tensor_parameters(a_params), AdamWOptions{.weight_decay = 0.1f});
  CHECK(MemoryTracker::live(MemoryCategory::Optimizer) - before == 2 * 9 * 4);
  for (int step = 1; step <= 2; ++step) {
    set_grads(a_params, step);
    a->step(1e-2f);
  }
  // A fresh optimizer loads parameters and state (as a checkpoint resume does).
  NamedTensors b_params = two_params();
  AdamW b(tensor_parameters(b_params), AdamWOptions{.weight_decay = 0.1f});
  for (size_t k = 0; k < 2; ++k) b_params[k].second.copy_(a_params[k].second);
  for (size_t k = 0; k < 4; ++k) Tensor(state_of(b)[k].second).copy_(state_of(*a)[k].second);
  b.set_step_count(a->step_count());
  set_grads(a_params, 3);
  set_grads(b_params, 3);
  a->step(1e-2f);
  b.step(1e-2f);
  for (size_t k = 0; k < 2; ++k) CHECK(same_bits(a_params[k].second.span(), b_params[k].second.span()));
  a.reset();
  CHECK(MemoryTracker::live(MemoryCategory::Optimizer) - before == 2 * 9 * 4);  // b's state only
}

TEST_CASE("updating slices with the span kernels equals the full update bit for bit") {
  const int64_t n = 100003;  // above the OpenMP threshold, odd so slices are unaligned
  std::vector<float> init(n), grad(n);
  for (int64_t i = 0; i < n; ++i) init[i] = std::cos(i * 0.01f), grad[i] = grad_value(1, i % 97) * 1e-3f;
  NamedTensors full = {{"w", leaf({n}, init)}};
  AdamW opt(tensor_parameters(full, [](const std::string&, const Tensor&) { return true; }), {.weight_decay = 0.1f});
  NamedTensors sgd_full = {{"w2", leaf({n}, init)}};
  SGD sgd_full_opt(tensor_parameters(sgd_full), {.momentum = 0.9f});

  std::vector<float> p = init, m(n, 0.0f), v(n, 0.0f), p_sgd = init, buf(n, 0.0f);
  const int64_t cuts[] = {0, 1, 33335, 66667, n};  // four "ranks"
  for (int step = 1; step <= 2; ++step) {
    Tensor(full[0].second).set_grad(Tensor::from({n}, grad));
    opt.step(1e-3f);
    Tensor w2 = sgd_full[0].second;
    w2.set_grad(Tensor::from({n}, grad));
    sgd_full_opt.step(1e-3f);
    const AdamWCoefficients c = adamw_coefficients(opt.options(), 1e-3f, step, true);
    for (int r = 0; r < 4; ++r) {
      const auto at = static_cast<size_t>(cuts[r]), count = static_cast<size_t>(cuts[r + 1] - cuts[r]);
      adamw_update(std::span(p).subspan(at, count), std::span<const float>(grad).subspan(at, count),
                   std::span(m).subspan(at, count), std::span(v).subspan(at, count), c);
      sgd_update(std::span(p_sgd).subspan(at, count), std::span<const float>(grad).subspan(at, count),
                 std::span(buf).subspan(at, count), 1e-3f, 0.9f);
    }
  }
  CHECK(same_bits(full[0].second.span(), p));
  CHECK(same_bits(state_of(opt)[0].second.span(), m));
  CHECK(same_bits(state_of(opt)[1].second.span(), v));
  CHECK(same_bits(sgd_full[0].second.span(), p_sgd));
}

TEST_CASE("warmup then cosine schedule") {
  WarmupCosine s(1e-3, 1e-4, 10, 110);
  CHECK(s.lr(0) == doctest::Approx(1e-4));          // 1/10 of the peak
  CHECK(s.lr(4) == doctest::Approx(5e-4));
  CHECK(s.lr(9) == doctest::Approx(1e-3));          // end of warmup
  CHECK(s.lr(10) == doctest::Approx(1e-3));         // peak
  CHECK(s.lr(60) == doctest::Approx(5.5e-4));       // half way down the cosine
  CHECK(s.lr(35) == doctest::Approx(1e-4 + 9e-4 * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(s.lr(110) == doctest::Approx(1e-4));        // the floor, and after
  CHECK(s.lr(1000) == doctest::Approx(1e-4));
  CHECK(s.lr(109) > s.lr(110));
  CHECK(WarmupCosine(1.0, 0.0, 0, 5).lr(0) == doctest::Approx(1.0));
  CHECK_THROWS_AS(WarmupCosine(1e-4, 1e-3, 10, 100), UserError);
  CHECK_THROWS_AS(WarmupCosine(1e-3, 0.0, 200, 100), UserError);
}

TEST_CASE("global-norm clipping returns the pre-clip norm and scales to max_norm") {
  NamedTensors params = {{"a", leaf({2}, {0, 0})}, {"b", leaf({2}, {0, 0})}, {"no_grad", leaf({1}, {0})}};
  params[0].second.set_grad(Tensor::from({2}, {3.0f, 0.0f}));
  params[1].second.set_grad(Tensor::from({2}, {0.0f, -4.0f}));
  CHECK(clip_grad_norm(tensor_parameters(params)(), 10.0) == doctest::Approx(5.0));  // below max: untouched
  CHECK(params[1].second.grad().data()[1] == -4.0f);
  CHECK(clip_grad_norm(tensor_parameters(params)(), 0.0) == doctest::Approx(5.0));  // measure only

  double seen = 0.0;  // a reduce that adds another rank's 11 (so the global norm is 6)
  const double norm = clip_grad_norm(tensor_parameters(params)(), 1.0, [&](double local) {
    seen = local;
    return local + 11.0;
  });
  CHECK(seen == doctest::Approx(25.0));
  CHECK(norm == doctest::Approx(6.0));
  CHECK(params[0].second.grad().data()[0] == doctest::Approx(3.0 / 6.0));
  CHECK(params[1].second.grad().data()[1] == doctest::Approx(-4.0 / 6.0));
  CHECK(clip_grad_norm(tensor_parameters(params)(), 0.0) == doctest::Approx(5.0 / 6.0));
}

namespace {

// loss = scale * mean over rows n of (w . x_n - y_n)^2, with its backward as a custom Node.
Tensor scaled_mse(const Tensor& w, const std::vector<std::vector<float>>& x, const std::vector<float>& y,
                  size_t begin, size_t end, float scale) {
  const double count = static_cast<double>(end - begin);
  double loss = 0.0;
  std::vector<double> grad(w.numel(), 0.0);
  for (size_t n = begin; n < end; ++n) {
    double residual = -y[n];
    for (int64_t j = 0; j < w.numel(); ++j) residual += w.data()[j] * x[n][j];
    loss += residual * residual / count;
    for (int64_t j = 0; j < w.numel(); ++j) grad[j] += 2.0 * residual * x[n][j] / count;
  }
  Tensor out = Tensor::from({1}, {static_cast<float>(loss * scale)});
  return record(out, "scaled_mse", {w}, [grad, scale, shape = w.shape()](const Tensor& g) {
    Tensor gw = Tensor::empty(shape);
    for (size_t j = 0; j < grad.size(); ++j) gw.data()[j] = static_cast<float>(grad[j] * scale) * g.item();
    return std::vector<Tensor>{gw};
  });
}

}  // namespace

TEST_CASE("accumulating k microbatches with loss scaled by 1/k equals one large batch") {
  std::vector<std::vector<float>> x;
  std::vector<float> y;
  for (int n = 0; n < 12; ++n) {
    x.push_back({std::sin(n * 1.0f), std::cos(n * 2.0f), 0.5f * n});
    y.push_back(0.1f * n - 0.3f);
  }
  Tensor big = leaf({3}, {0.2f, -0.4f, 0.1f});
  scaled_mse(big, x, y, 0, 12, 1.0f).backward();

  Tensor accumulated = leaf({3}, {0.2f, -0.4f, 0.1f});
  const double mean_loss = accumulate_gradients(4, [&](int i, float scale) {
    CHECK(scale == 0.25f);
    scaled_mse(accumulated, x, y, 3 * i, 3 * i + 3, scale).backward();
    return static_cast<double>(scaled_mse(accumulated, x, y, 3 * i, 3 * i + 3, 1.0f).item());
  });
  CHECK(mean_loss == doctest::Approx(scaled_mse(big, x, y, 0, 12, 1.0f).item()).epsilon(1e-6));
  for (int j = 0; j < 3; ++j) {
    CHECK(accumulated.grad().data()[j] == doctest::Approx(big.grad().data()[j]).epsilon(1e-5));
  }
  CHECK_THROWS_AS(accumulate_gradients(0, [](int, float) { return 0.0; }), UserError);
}
