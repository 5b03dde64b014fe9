// The differentiable pieces of a mixture-of-experts layer (nn/moe.h), in the order it
// calls them. N tokens of width D; each picks k of E experts; the dispatch buffer has
// one row per slot (expert, sequence, position under the capacity), and slots[t*k + j]
// is the row token t's j-th choice went to, or -1 when it was dropped.
//
//   Tensor probs = ops::softmax(router_logits);                  // [N, E] (attention.h)
//   Tensor gates = ops::topk_gates(probs, choices, k, k > 1);    // [N, k]
//   Tensor buf   = ops::dispatch(x, slots, k, rows);             // [rows, D]
//   Tensor y     = ops::combine(experts(buf), gates, slots);     // [N, D]
//   y = ops::attach_loss(y, aux_loss, coefficient);              // aux loss's gradient rides on y
#pragma once

#include <cstdint>
#include <span>

#include "framework/tensor.h"

namespace shardlab::ops {

// gates[t, j] = probs[t, choices[t*k + j]], divided by their sum over j when `renormalize`
// (Mixtral's top-k softmax); probs [N, E], choices [N*k].
Tensor topk_gates(const Tensor& probs, std::span<const int32_t> choices, int64_t k, bool renormalize);

// out[rows, D]: out[slots[t*k + j]] = x[t] for every kept choice; other rows are zero.
Tensor dispatch(const Tensor& x, std::span<const int32_t> slots, int64_t k, int64_t rows);

// out[t] = sum_j gates[t, j] * y[slots[t*k + j]] over kept choices (a token whose every
// choice was dropped gets zeros: the residual carries it). y [rows, D], gates [N, k].
Tensor combine(const Tensor& y, const Tensor& gates, std::span<const int32_t> slots);

// y[g, n, :] + b[g, :]: each expert's bias on its rows of a grouped product [G, n, D]
// (added after a tensor-parallel sum, once).
Tensor add_group_bias(const Tensor& y, const Tensor& b);

// Switch/GShard load-balancing loss, per sequence and averaged over the S sequences:
// (1/S) sum_s E sum_i f[s, i] * P[s, i], with P[s, i] the mean of probs over the
// sequence's tokens and f[s, i] (fractions, [S*E], a constant) the share of its choices
// routed to expert i. 1 when routing is uniform. probs [S*T, E].
Tensor load_balancing_loss(const Tensor& probs, std::span<const float> fractions, int64_t sequences);

// ST-MoE router z-loss: the mean over rows of logsumexp(logits[row])^2.
Tensor z_loss(const Tensor& logits);

// Returns x unchanged; backward passes x's gradient through and gives `loss` (a scalar)
// the gradient `scale`, as if scale * loss had been added to the objective. Megatron's
// MoEAuxLossAutoScaler: an auxiliary loss reaches backward through the activations, so it
// survives rematerialisation and pipeline stages that never see the final loss.
Tensor attach_loss(const Tensor& x, const Tensor& loss, float scale);

}  // namespace shardlab::ops
