#include "parallel/cost/model/autograd_activations.h"

#include <algorithm>
#include <cmath>

#include "framework/ops/attention.h"

namespace shardlab::cost {

double attention_probability_elements(int64_t sequence) {
  const int64_t t = std::max<int64_t>(1, sequence), block = ops::kAttentionRowBlock;
  double kept = 0;
  for (int64_t r0 = 0; r0 < t; r0 += block) {
    const int64_t r1 = std::min(t, r0 + block);
    kept += static_cast<double>(r1 - r0) * static_cast<double>(r1);
  }
  return kept / static_cast<double>(t);
}

namespace {

// Capacity slots an MoE layer's experts compute per token: E ceil(C T k / E) / T.
double expert_slots_per_token(const TransformerShape& s, const ActivationQuery& q) {
  const double t = static_cast<double>(std::max<int64_t>(1, q.sequence)), e = static_cast<double>(s.experts);
  if (q.capacity_factor <= 0) return e;  // dropless: the bound (the fullest expert can need the whole sequence)
  return e * std::ceil(q.capacity_factor * t * static_cast<double>(s.top_k) / e) / t;
}

// What attention keeps for backward per token, all heads: its probabilities, or under
// context parallelism the packed K/V (every rank's when all-gathered) and the log-sum-exp.
double attention_saved_elements(const TransformerShape& s, const ActivationQuery& q) {
  if (q.context <= 1) return static_cast<double>(s.heads) * attention_probability_elements(q.sequence);
  const double kv = 2.0 * static_cast<double>(s.kv_heads * s.head_dim);
  return kv * (q.context_allgather ? q.context + 1 : 1) + static_cast<double>(s.heads);
}

// The MLP's hidden activations per row it sees: GELU keeps fc and gelu outputs, SwiGLU
// gate, up and their product.
double hidden_per_row(const TransformerShape& s) { return (s.gated_mlp ? 3.0 : 2.0) * static_cast<double>(s.d_ff); }

}  // namespace

BlockActivations shardlab_block_elements(const TransformerShape& s, const ActivationQuery& q, bool moe) {
  const double d = s.d_model, t = q.tensor, qkv = static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim);
  const double heads_out = static_cast<double>(s.heads * s.head_dim);
  const double stats = s.layer_norm ? 4 : 2;  // per norm: mean and rstd, or rstd
  const bool rope = s.learned_positions == 0;
  BlockActivations b;
  // The residual stream and the norms: x, norm1, the attention projection's output, h,
  // norm2, the feed-forward's output (each region's exit adds its all_reduce output, or
  // with sequence parallelism keeps the gathered norm outputs full and the rest divided).
  // A row-parallel Linear adds its bias after the reduction: one more stream-wide tensor.
  const double exits = q.tensor > 1 ? 2 * (s.bias ? 2 : 1) * d : 0, exits_sp = s.bias ? 2 * d : 0;
  if (q.tensor > 1 && q.sequence_parallel) {
    b.replicated = 4 * d;
    b.divided = (6 * d + stats + exits_sp) / t;
  } else {
    b.replicated = 6 * d + stats + exits;
  }
  // Attention: Q/K/V (and its RoPE copy), the heads' output and what it keeps for backward.
  b.divided += ((rope ? 2 : 1) * qkv + heads_out + attention_saved_elements(s, q)) / t;
  if (!moe) {
    b.divided += hidden_per_row(s) / t;
    return b;
  }
  // MoE: router logits and probabilities (and z-loss's copy), then per capacity slot the
  // dispatched row, the expert's hidden activations and its output; the combined output.
  const double slots = expert_slots_per_token(s, q);
  b.replicated += 3.0 * static_cast<double>(s.experts) + static_cast<double>(s.top_k) + d +
                  slots * 2 * d * (q.expert > 1 ? 2 : 1);  // expert parallelism: both all_to_all buffers
  b.divided += slots * hidden_per_row(s) / t;
  return b;
}

ActivationBytes shardlab_activation_bytes(const TransformerShape& s, const ActivationQuery& q) {
  const double d = s.d_model, t = q.tensor;
  const double dense_layers = q.layers - q.moe_layers;
  const BlockActivations dense = shardlab_block_elements(s, q, false);
  const BlockActivations moe = s.experts > 0 ? shardlab_block_elements(s, q, true) : dense;
  const double full_layers = dense_layers * dense.total() + q.moe_layers * moe.total();  // per token
  const BlockActivations& largest = q.moe_layers > 0 ? moe : dense;
  double per_token = 0;   // kept for every microbatch in flight
  double recompute = 0;   // once: a block being recomputed
  const double block_input = q.tensor > 1 && q.sequence_parallel ? d / t : d;
  // A recomputed block's backward peaks in its MLP, on top of the block it recomputed:
  // SwiGLU's backward holds the gate's and the up-projection's gradients (2 F); GELU's
  // output projection holds its output's gradient (D), its input's (F) and its weight's
  // gradient (D x F for the whole microbatch) before that is accumulated.
  const double f = static_cast<double>(s.d_ff) / t;
  // Under bf16 its matmuls also hold copies of the operands they multiply (GELU's: about as
  // many again; SwiGLU's: one hidden width), at the copies' bytes, and the recomputed
  // attention its copy of Q, K and V and of its output's gradient.
  const double copies = q.matmul_copy_bytes / sizeof(float);
  const double attention_copy = static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim) / t + d;
  const double mlp = s.gated_mlp ? 2.0 * f : d + f + d * f / std::max(1.0, q.tokens);
  const double backward_transient = mlp + copies * (s.gated_mlp ? f : mlp) + copies * attention_copy;
  switch (q.remat) {
    case nn::Remat::None:
      per_token = full_layers;
      break;
    case nn::Remat::Full:
      per_token = q.layers * block_input;
      recompute = largest.total() + backward_transient;
      break;
    case nn::Remat::SaveMatmulOutputs:
    case nn::Remat::SaveMlpMatmulOutputs: {
      const double qkv = static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim);
      const double up = (s.gated_mlp ? 2.0 : 1.0) * static_cast<double>(s.d_ff) / t;  // the MLP's up-projections
      const double all = q.remat == nn::Remat::SaveMatmulOutputs;
      const double kept_dense = up + all * (qkv / t + 2 * d);
      const double kept_moe = static_cast<double>(s.experts) + all * (qkv / t + d);
      per_token = dense_layers * (block_input + kept_dense) + q.moe_layers * (block_input + kept_moe);
      // The recompute reuses the kept Linear outputs instead of allocating them again.
      recompute = largest.total() - (q.moe_layers > 0 ? kept_moe : kept_dense) + backward_transient;
      break;
    }
  }
  // The first stage's token embedding (GPT adds positions to it: one more row; a
  // vocabulary-parallel embedding adds its partial sum before the reduction).
  if (q.embedding) per_token += (s.learned_positions > 0 ? d : 0) + (q.tensor > 1 ? d : 0);
  if (!q.head) per_token += block_input;  // the stage's output, until the next stage's gradient returns
  // The last stage's head -- final block output, final norm, logits and softmax (V/t each)
  // -- and, as backward starts, the logits' gradient: gone before the first block is
  // recomputed.
  // The fused head keeps no logits: while its backward runs, a chunk and its operand copy,
  // the input's gradient (D per token) and the weight's, [V/t, D], which it fills chunk by chunk.
  const double vocab = static_cast<double>(s.vocab) / t;
  const bool fused = q.fused_head_chunk_bytes > 0;
  const double head = !q.head ? 0 : (fused ? 3 * d : 2 * d + 3 * vocab) + (s.layer_norm ? 2 : 1);
  const double chunk = q.head && fused ? q.fused_head_chunk_bytes * (1 + q.matmul_copy_bytes / sizeof(float)) +
                                             sizeof(float) * vocab * d
                                       : 0;
  const double bytes = sizeof(float) * q.tokens;
  // A bf16 matmul's operand copy, alive while it runs: on the last stage the logits'
  // gradient's takes the place of cross entropy's softmax, freed just before it; on
  // another stage it comes on top of the kept tensors: the attention's copy of Q, K and V
  // or the MLP's of its hidden activations, whichever is wider.
  const double widest = std::max(static_cast<double>(s.d_ff), static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim));
  double copy = q.head ? 0.0 : q.matmul_copy_bytes * q.tokens * widest / t;
  if (q.deferred_weight_gradients) {  // the fused Q/K/V projection's: its output gradient and input
    copy += q.matmul_copy_bytes * q.tokens * (static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim) / t + d);
  }
  return {.kept = bytes * per_token * q.in_flight,
          .head = bytes * head + chunk + copy,
          .recompute = bytes * recompute,
          .kept_backward = bytes * per_token,
          .layers = std::max(1.0, q.layers)};
}

double shardlab_peak_bytes(double state, double grads, bool grads_held, const ActivationBytes& a) {
  double recomputing = 0;
  if (a.recompute > 0) {
    // Block i of L recomputed: the kept tensors of blocks 0..i, the gradients of blocks
    // i+1..L-1 (all of them if earlier microbatches made them). Linear in i: its ends.
    const double done = (a.layers - 1) / a.layers;
    const double last_first = a.kept + (grads_held ? grads : 0.0);
    const double first_last = a.kept - done * a.kept_backward + (grads_held ? grads : done * grads);
    recomputing = a.recompute + std::max(last_first, first_last);
  }
  return state + std::max({a.kept + a.head + (grads_held ? grads : 0.0), recomputing, grads});
}

}  // namespace shardlab::cost
