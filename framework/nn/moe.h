// Mixture-of-experts feed-forward layer (Switch Transformer, GShard, Mixtral).
//
// Per token x[t] of a sequence of T tokens, with E experts and k choices:
//
//   logits = router(x) [E];  probs = softmax(logits)
//   choices = the k experts of highest probability (ties: the lower index)
//   gates = their probs (k = 1, Switch), or renormalised to sum to 1 (k > 1, Mixtral)
//   y[t] = sum_j gates[j] * expert_{choices[j]}(x[t])  over the choices kept
//
// Capacity. Each expert takes at most C = ceil(capacity_factor * T * k / E) tokens of a
// sequence. Dropless (capacity_factor 0) drops nothing: C is what the fullest expert
// needs in any sequence of this forward (at most T), agreed over the ranks that exchange
// buffers (the `expert_parallel.agree_capacity` hook), so no slot row is padding beyond
// that. Slots are given in priority order -- every token's first choice in token order,
// then every second choice, ... (GShard) --
// and a choice that finds its expert full is dropped; a token whose choices all drop
// passes through the block's residual unchanged. Capacity counts per sequence, never
// over the batch, so routing does not depend on how the batch is split over ranks or
// microbatches: every layout routes and drops exactly the tokens one process does.
//
// Experts. Their weights are stacked along a leading expert dim (w_in [E, F, D], ...)
// and run as one grouped GEMM on a dispatch buffer [E, S * C, D] (S sequences), zero
// where a slot is empty; expert parallelism (parallel/expert) keeps a block of the E and
// moves buffer rows between ranks with all_to_all through the `expert_parallel.exchange`
// hook.
//
// Auxiliary losses, each averaged over sequences (or tokens) so that they split over
// ranks and microbatches as the cross-entropy does:
//   load balancing  E * sum_i f_i P_i per sequence (f_i: share of its choices routed to
//                   expert i, P_i: mean router probability), times aux_loss_coef
//   router z-loss   mean logsumexp(logits)^2, times z_loss_coef
// They are not in Transformer::loss's value: their gradients ride on the layer's output
// (ops::attach_loss) scaled by MoeState::loss_scale, and their values go to MoeStats.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "framework/nn/config.h"
#include "framework/nn/layers.h"

namespace shardlab::nn {

// What a training step's MoE layers did, summed over layers and forward passes (a
// rematerialised block's recompute is not counted twice).
struct MoeStats {
  double aux_loss = 0.0;      // load-balancing loss, summed over layer forwards
  double z_loss = 0.0;
  int64_t layer_forwards = 0;
  int64_t choices = 0;        // token choices routed (tokens x k)
  int64_t dropped = 0;        // of them, dropped for capacity
  std::vector<double> load;   // per expert, choices kept

  void clear() { *this = MoeStats{}; }
};

// Shared by a model's MoE layers: the statistics, and the scale the training step puts
// on the loss before backward (1 / microbatches), which the auxiliary losses follow.
struct MoeState {
  float loss_scale = 1.0f;
  MoeStats stats;
};

// Routing of S sequences of T tokens (probs [S*T, E], row-major).
struct Routing {
  int64_t capacity = 0;          // slots per expert per sequence
  int64_t fullest = 0;           // most slots one expert filled in one sequence
  std::vector<int32_t> choices;  // [S*T*k] expert of token t's j-th choice
  std::vector<int32_t> slots;    // [S*T*k] row in the buffer [E, S, capacity], or -1: dropped
  std::vector<float> fractions;  // [S*E] share of sequence s's choices routed to expert i (before drops)
  std::vector<int64_t> load;     // [E] choices kept
  int64_t dropped = 0;
};

// Slots per expert per sequence of T tokens (see the header comment); for dropless, the
// most it can be (T), which a forward narrows to what its routing needs.
int64_t expert_capacity(const ModelConfig& config, int64_t T);
Routing route(const float* probs, int64_t S, int64_t T, int64_t E, int64_t k, int64_t capacity);

class Moe : public Module {
 public:
  Moe(Module& parent, const std::string& name, const ModelConfig& config, float out_std,
      std::shared_ptr<MoeState> state);
  Tensor operator()(const Tensor& x) const;  // x [S, T, D]

  // Runs the experts this layer holds on a buffer [G, n, D] (G = experts held).
  Tensor experts(const Tensor& buffer) const;

  Linear router;  // D -> E, no bias
  // Stacked expert weights, GPT (GELU MLP): w_in [E, F, D], b_in [E, F], w_out [E, D, F],
  // b_out [E, D]; LLaMA (SwiGLU): w_gate, w_up [E, F, D], w_down [E, D, F].
  Tensor w_in, b_in, w_out, b_out, w_gate, w_up, w_down;

  // Where expert parallelism (parallel/expert/expert_parallel.cpp) changes this layer;
  // unset in a model nobody parallelised.
  struct ExpertParallelHooks {
    // Maps the dispatch buffer [E, S * C, D] to the experts' outputs of the same shape,
    // running `experts` where they live (all_to_all there and back). Unset: experts(buffer).
    std::function<Tensor(const Tensor& buffer, const std::function<Tensor(const Tensor&)>& experts)> exchange;
    // For a dropless layer: the slots per expert and sequence every rank of the exchange
    // uses, from this rank's need (the largest need of the group), as the buffers they
    // trade must have one shape. Unset: this rank's own need.
    std::function<int64_t(int64_t needed)> agree_capacity;
  } expert_parallel;
  // Where tensor parallelism (parallel/tensor/tensor_parallel.cpp), which splits each
  // expert's hidden units, changes this layer: dispatch_input applies to the tokens on
  // their way to the experts only (the router reads them as they are), reduce_partial to
  // the experts' partial products x · W_out^T before the output bias. Unset: nothing.
  struct TensorParallelHooks {
    Hook dispatch_input;
    Hook reduce_partial;
  } tensor_parallel;
  // Where context parallelism (parallel/context/context_parallel.cpp) changes this layer:
  // each rank routes its slice of every sequence (dropless only), and the load-balancing
  // loss's shares f_i of each sequence's choices are averaged over the context axis, so
  // that every rank weighs its probabilities by the whole sequence's. Unset: nothing.
  std::function<void(std::vector<float>& fractions)> context_fractions;

 private:
  const ModelConfig config_;
  std::shared_ptr<MoeState> state_;
};

}  // namespace shardlab::nn
