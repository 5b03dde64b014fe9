#include "framework/nn/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/nn/remat.h"
#include "framework/ops.h"

namespace shardlab::nn {

int64_t expert_capacity(const ModelConfig& c, int64_t T) {
  if (c.capacity_factor == 0.0f) return T;  // dropless: an expert can take every token of a sequence
  const double slots = std::ceil(static_cast<double>(c.capacity_factor) * T * c.top_k / c.experts);
  return std::clamp<int64_t>(static_cast<int64_t>(slots), 1, T);
}

Routing route(const float* probs, int64_t S, int64_t T, int64_t E, int64_t k, int64_t capacity) {
  Routing r;
  r.capacity = capacity;
  r.choices.resize(S * T * k);
  r.slots.assign(S * T * k, -1);
  r.fractions.assign(S * E, 0.0f);
  r.load.assign(E, 0);
  std::vector<int32_t> order(E);
  for (int64_t n = 0; n < S * T; ++n) {
    const float* p = probs + n * E;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    std::copy(order.begin(), order.begin() + k, r.choices.begin() + n * k);
  }
  std::vector<int64_t> filled(E);
  for (int64_t s = 0; s < S; ++s) {
    std::fill(filled.begin(), filled.end(), 0);
    for (int64_t j = 0; j < k; ++j) {  // priority: every first choice, then every second, ...
      for (int64_t t = 0; t < T; ++t) {
        const int64_t i = (s * T + t) * k + j;
        const int32_t e = r.choices[i];
        r.fractions[s * E + e] += 1.0f / static_cast<float>(T * k);
        if (filled[e] == capacity) {
          ++r.dropped;
          continue;
        }
        r.slots[i] = static_cast<int32_t>((e * S + s) * capacity + filled[e]++);
        r.fullest = std::max(r.fullest, filled[e]);
        ++r.load[e];
      }
    }
  }
  return r;
}

Moe::Moe(Module& parent, const std::string& name, const ModelConfig& c, float out_std, std::shared_ptr<MoeState> state)
    : router(*this, "router", c.d_model, c.experts, false), config_(c), state_(std::move(state)) {
  parent.add_child_module(*this, name);
  const int64_t E = c.experts, D = c.d_model, F = c.d_ff;
  if (c.arch == Arch::Gpt) {
    add_parameter(w_in, "w_in", {E, F, D}, {Init::Normal, 0.02f}, true);
    add_parameter(b_in, "b_in", {E, F}, {Init::Zeros}, false);
    add_parameter(w_out, "w_out", {E, D, F}, {Init::Normal, out_std}, true);
    add_parameter(b_out, "b_out", {E, D}, {Init::Zeros}, false);
  } else {
    add_parameter(w_gate, "w_gate", {E, F, D}, {Init::Normal, 0.02f}, true);
    add_parameter(w_up, "w_up", {E, F, D}, {Init::Normal, 0.02f}, true);
    add_parameter(w_down, "w_down", {E, D, F}, {Init::Normal, out_std}, true);
  }
}

Tensor Moe::experts(const Tensor& buffer) const {
  if (config_.arch == Arch::Gpt) {
    Tensor h = ops::gelu(ops::batched_linear(buffer, use("w_in", w_in), use("b_in", b_in)));
    if (!tensor_parallel.reduce_partial) return ops::batched_linear(h, use("w_out", w_out), use("b_out", b_out));
    const Tensor partial = ops::batched_linear(h, use("w_out", w_out));
    return ops::add_group_bias(tensor_parallel.reduce_partial(partial), use("b_out", b_out));
  }
  Tensor h = ops::swiglu(ops::batched_linear(buffer, use("w_gate", w_gate)), ops::batched_linear(buffer, use("w_up", w_up)));
  Tensor y = ops::batched_linear(h, use("w_down", w_down));
  return tensor_parallel.reduce_partial ? tensor_parallel.reduce_partial(y) : y;
}

Tensor Moe::operator()(const Tensor& x) const {
  return forward_hooked(x, [this](const Tensor& in) {
    SL_ASSERT(in.ndim() == 3, "an MoE layer takes [sequences, T, D], got " + shape_str(in.shape()));
    const int64_t S = in.dim(0), T = in.dim(1), D = in.dim(2), E = config_.experts, k = config_.top_k;
    Tensor flat = ops::reshape(in, {S * T, D});
    Tensor logits = router(flat);
    Tensor probs = ops::softmax(logits);
    Routing r = route(probs.data(), S, T, E, k, expert_capacity(config_, T));
    if (config_.capacity_factor == 0.0f) {  // dropless: the slots the fullest expert needs, not T
      const int64_t needed = expert_parallel.agree_capacity ? expert_parallel.agree_capacity(r.fullest) : r.fullest;
      if (needed < r.capacity) r = route(probs.data(), S, T, E, k, std::max<int64_t>(needed, 1));
    }
    const int64_t capacity = r.capacity;

    Tensor gates = ops::topk_gates(probs, r.choices, k, /*renormalize=*/k > 1);
    const Tensor tokens = tensor_parallel.dispatch_input ? tensor_parallel.dispatch_input(flat) : flat;
    Tensor buffer = ops::reshape(ops::dispatch(tokens, r.slots, k, E * S * capacity), {E, S * capacity, D});
    const auto run = [this](const Tensor& b) { return experts(b); };
    Tensor out = expert_parallel.exchange ? expert_parallel.exchange(buffer, run) : run(buffer);
    Tensor y = ops::combine(ops::reshape(out, {E * S * capacity, D}), gates, r.slots);

    if (context_fractions) context_fractions(r.fractions);
    Tensor aux = ops::load_balancing_loss(probs, r.fractions, S);
    Tensor z = ops::z_loss(logits);
    Tensor penalty = ops::add(ops::scale(aux, config_.aux_loss_coef), ops::scale(z, config_.z_loss_coef));
    y = ops::attach_loss(y, penalty, state_->loss_scale);
    if (!recomputing()) {
      MoeStats& st = state_->stats;
      st.aux_loss += aux.item();
      st.z_loss += z.item();
      st.layer_forwards += 1;
      st.choices += S * T * k;
      st.dropped += r.dropped;
      st.load.resize(E, 0.0);
      for (int64_t e = 0; e < E; ++e) st.load[e] += static_cast<double>(r.load[e]);
    }
    return ops::reshape(y, in.shape());
  });
}

}  // namespace shardlab::nn
