#include "framework/ops/routing.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/fast_math.h"

namespace shardlab::ops {
namespace {

void check_slots(std::span<const int32_t> slots, int64_t tokens, int64_t k, int64_t rows) {
  SL_ASSERT(static_cast<int64_t>(slots.size()) == tokens * k,
            std::to_string(slots.size()) + " slots for " + std::to_string(tokens) + " tokens x k=" + std::to_string(k));
  for (int32_t s : slots) SL_ASSERT(s >= -1 && s < rows, "slot " + std::to_string(s) + " outside " + std::to_string(rows) + " rows");
}

}  // namespace

Tensor topk_gates(const Tensor& probs, std::span<const int32_t> choices, int64_t k, bool renormalize) {
  const int64_t E = probs.dim(-1), N = probs.numel() / E;
  check_slots(choices, N, k, E);
  std::vector<int32_t> picked(choices.begin(), choices.end());
  Tensor gates = Tensor::empty({N, k});
  std::vector<float> sums(N, 1.0f);
  for (int64_t t = 0; t < N; ++t) {
    float s = 0.0f;
    for (int64_t j = 0; j < k; ++j) s += gates.data()[t * k + j] = probs.data()[t * E + picked[t * k + j]];
    if (renormalize) {
      sums[t] = s;
      for (int64_t j = 0; j < k; ++j) gates.data()[t * k + j] /= s;
    }
  }
  return record(gates, "topk_gates", {probs}, [gates, picked = std::move(picked), sums = std::move(sums), N, E, k,
                                               renormalize](const Tensor& gg) {
    // g_j = p_j / s with s = sum_i p_i: dg_j/dp_i = (delta_ij - g_j) / s.
    Tensor gp = Tensor::zeros({N, E});
    for (int64_t t = 0; t < N; ++t) {
      const float* g = gg.data() + t * k;
      float dot = 0.0f;
      if (renormalize) {
        for (int64_t j = 0; j < k; ++j) dot += g[j] * gates.data()[t * k + j];
      }
      for (int64_t j = 0; j < k; ++j) gp.data()[t * E + picked[t * k + j]] += (g[j] - dot) / sums[t];
    }
    return std::vector<Tensor>{gp};
  });
}

Tensor dispatch(const Tensor& x, std::span<const int32_t> slots, int64_t k, int64_t rows) {
  const int64_t D = x.dim(-1), N = x.numel() / D;
  check_slots(slots, N, k, rows);
  std::vector<int32_t> kept(slots.begin(), slots.end());
  Tensor out = Tensor::zeros({rows, D});
  // Each kept choice fills its own slot: the loops below parallelise over tokens safely.
#pragma omp parallel for if (N * k * D > 65536)
  for (int64_t i = 0; i < N * k; ++i) {
    if (kept[i] >= 0) std::memcpy(out.data() + kept[i] * D, x.data() + (i / k) * D, D * sizeof(float));
  }
  return record(out, "dispatch", {x}, [kept = std::move(kept), shape = x.shape(), N, D, k](const Tensor& go) {
    Tensor gx = Tensor::zeros(shape);
#pragma omp parallel for if (N * k * D > 65536)
    for (int64_t t = 0; t < N; ++t) {
      for (int64_t i = t * k; i < (t + 1) * k; ++i) {
        if (kept[i] < 0) continue;
        const float* g = go.data() + kept[i] * D;
        float* o = gx.data() + t * D;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) o[d] += g[d];
      }
    }
    return std::vector<Tensor>{gx};
  });
}

Tensor combine(const Tensor& y, const Tensor& gates, std::span<const int32_t> slots) {
  SL_ASSERT(y.ndim() == 2 && gates.ndim() == 2, "combine: y " + shape_str(y.shape()) + ", gates " + shape_str(gates.shape()));
  const int64_t D = y.dim(1), N = gates.dim(0), k = gates.dim(1);
  check_slots(slots, N, k, y.dim(0));
  std::vector<int32_t> kept(slots.begin(), slots.end());
  Tensor out = Tensor::zeros({N, D});
#pragma omp parallel for if (N * k * D > 65536)
  for (int64_t t = 0; t < N; ++t) {
    for (int64_t i = t * k; i < (t + 1) * k; ++i) {
      if (kept[i] < 0) continue;
      const float g = gates.data()[i];
      const float* in = y.data() + kept[i] * D;
      float* o = out.data() + t * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) o[d] += g * in[d];
    }
  }
  return record(out, "combine", {y, gates}, [y, gates, kept = std::move(kept), N, D, k](const Tensor& go) {
    Tensor gy = Tensor::zeros(y.shape()), gg = Tensor::zeros(gates.shape());
#pragma omp parallel for if (N * k * D > 65536)
    for (int64_t i = 0; i < N * k; ++i) {
      if (kept[i] < 0) continue;
      const float g = gates.data()[i];
      const float* grad = go.data() + (i / k) * D;
      const float* in = y.data() + kept[i] * D;
      float* o = gy.data() + kept[i] * D;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < D; ++d) {
        o[d] = g * grad[d];  // each slot holds one token's choice: written once
        dot += grad[d] * in[d];
      }
      gg.data()[i] = dot;
    }
    return std::vector<Tensor>{gy, gg};
  });
}

Tensor add_group_bias(const Tensor& y, const Tensor& b) {
  SL_ASSERT(y.ndim() == 3 && b.ndim() == 2 && b.dim(0) == y.dim(0) && b.dim(1) == y.dim(2),
            "add_group_bias: y " + shape_str(y.shape()) + ", b " + shape_str(b.shape()));
  const int64_t G = y.dim(0), n = y.dim(1), D = y.dim(2);
  Tensor out = Tensor::empty(y.shape());
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t r = 0; r < n; ++r) {
      const float* in = y.data() + (g * n + r) * D;
      float* o = out.data() + (g * n + r) * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) o[d] = in[d] + b.data()[g * D + d];
    }
  }
  return record(out, "add_group_bias", {y, b}, [G, n, D, shape = b.shape()](const Tensor& go) {
    Tensor gb = Tensor::zeros(shape);
    for (int64_t g = 0; g < G; ++g) {
      for (int64_t r = 0; r < n; ++r) {
        const float* in = go.data() + (g * n + r) * D;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) gb.data()[g * D + d] += in[d];
      }
    }
    return std::vector<Tensor>{go, gb};
  });
}

Tensor load_balancing_loss(const Tensor& probs, std::span<const float> fractions, int64_t sequences) {
  const int64_t E = probs.dim(-1), N = probs.numel() / E, S = sequences;
  SL_ASSERT(S > 0 && N % S == 0 && static_cast<int64_t>(fractions.size()) == S * E,
            "load_balancing_loss: " + std::to_string(N) + " tokens in " + std::to_string(S) + " sequences, " +
                std::to_string(fractions.size()) + " fractions for " + std::to_string(E) + " experts");
  const int64_t T = N / S;
  std::vector<float> f(fractions.begin(), fractions.end());
  double total = 0.0;
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t i = 0; i < E; ++i) {
      double P = 0.0;
      for (int64_t t = 0; t < T; ++t) P += probs.data()[(s * T + t) * E + i];
      total += static_cast<double>(E) * f[s * E + i] * P / T;
    }
  }
  Tensor loss = Tensor::full({}, static_cast<float>(total / S));
  return record(loss, "load_balancing_loss", {probs}, [f = std::move(f), shape = probs.shape(), S, T, E](const Tensor& gl) {
    Tensor gp = Tensor::empty(shape);
    const float scale = gl.item() * static_cast<float>(E) / static_cast<float>(S * T);
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < E; ++i) gp.data()[(s * T + t) * E + i] = scale * f[s * E + i];
      }
    }
    return std::vector<Tensor>{gp};
  });
}

Tensor z_loss(const Tensor& logits) {
  const int64_t C = logits.dim(-1), R = logits.numel() / C;
  Tensor probs = Tensor::empty({R, C});
  std::vector<float> lse(R);
  double total = 0.0;
  for (int64_t r = 0; r < R; ++r) {
    const SoftmaxStats st = softmax_row(logits.data() + r * C, probs.data() + r * C, C);
    lse[r] = st.max + std::log(st.sum);
    total += static_cast<double>(lse[r]) * lse[r];
  }
  Tensor loss = Tensor::full({}, static_cast<float>(total / R));
  return record(loss, "z_loss", {logits}, [probs, lse = std::move(lse), shape = logits.shape(), R, C](const Tensor& gl) {
    // d/dx (lse^2) = 2 lse softmax(x).
    Tensor gx = Tensor::empty(shape);
    const float s = 2.0f * gl.item() / static_cast<float>(R);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t j = 0; j < C; ++j) gx.data()[r * C + j] = s * lse[r] * probs.data()[r * C + j];
    }
    return std::vector<Tensor>{gx};
  });
}

Tensor attach_loss(const Tensor& x, const Tensor& loss, float scale) {
  SL_ASSERT(loss.numel() == 1, "attach_loss: the loss must be a scalar, got " + shape_str(loss.shape()));
  return record(x.view(x.shape()), "attach_loss", {x, loss}, [scale](const Tensor& gy) {
    return std::vector<Tensor>{gy, Tensor::full({}, scale)};
  });
}

}  // namespace shardlab::ops
