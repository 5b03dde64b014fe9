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

// The largest row block of causal attention's scores, per query position: max over blocks
// of rows x keys, over T (ops::causal_attention keeps one block's scores gradient at a time).
double attention_block_scores(int64_t sequence) {
  const int64_t t = std::max<int64_t>(1, sequence), block = ops::kAttentionRowBlock;
  double largest = 0;
  for (int64_t r0 = 0; r0 < t; r0 += block) {
    const int64_t r1 = std::min(t, r0 + block);
    largest = std::max(largest, static_cast<double>(r1 - r0) * static_cast<double>(r1));
  }
  return largest / static_cast<double>(t);
}

// Capacity slots an MoE layer's experts compute per token: E ceil(C T k / E) / T.
double expert_slots_per_token(const TransformerShape& s, const ActivationQuery& q) {
  const double t = static_cast<double>(std::max<int64_t>(1, q.sequence)), e = static_cast<double>(s.experts);
  if (q.capacity_factor <= 0) return e;  // dropless: the bound (the fullest expert can need the whole sequence)
  return e * std::ceil(q.capacity_factor * t * static_cast<double>(s.top_k) / e) / t;
}

// A matmul's input as its backward keeps it, in fp32 elements: a bf16 copy (half) under
// oneDNN's bf16 kernels, else fp32 values (the input itself, or its bf16-rounded copy).
double kept_matmul_input(const ActivationQuery& q) { return q.matmul_copy_bytes == 2 ? 0.5 : 1.0; }

// What attention keeps for backward per token, all heads: its probabilities (as P V reads
// them), or under context parallelism the packed K/V (every rank's when all-gathered) and
// the log-sum-exp.
double attention_saved_elements(const TransformerShape& s, const ActivationQuery& q) {
  if (q.context <= 1) {
    return kept_matmul_input(q) * static_cast<double>(s.heads) * attention_probability_elements(q.sequence);
  }
  const double kv = 2.0 * static_cast<double>(s.kv_heads * s.head_dim);
  return kv * (q.context_allgather ? q.context + 1 : 1) + static_cast<double>(s.heads);
}

// The MLP's hidden activations per row it sees: GELU keeps its input (fc's output) and the
// output projection its output; SwiGLU keeps gate and up, the output projection their
// product.
double hidden_per_row(const TransformerShape& s, const ActivationQuery& q) {
  return ((s.gated_mlp ? 2.0 : 1.0) + kept_matmul_input(q)) * static_cast<double>(s.d_ff);
}

// What a zero-bubble input-gradient pass leaves for its weight pass, per token of one block:
// each Linear's output gradient (fp32) and, unless `gradients_only`, its input as its matmul
// read it (Linears reading one tensor share it in fp32; under bf16 each converted its own
// copy). The experts' grouped GEMM makes its weights' gradients at once; an MoE block
// defers only its router.
double weight_pass_elements(const TransformerShape& s, const ActivationQuery& q, bool moe, bool gradients_only) {
  const double d = s.d_model, t = q.tensor, f = static_cast<double>(s.d_ff) / t;
  const double m = gradients_only ? 0.0 : kept_matmul_input(q);
  const double qkv = static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim) / t;
  const double heads_out = static_cast<double>(s.heads * s.head_dim) / t;
  const double attention = qkv + d + m * (d + heads_out);
  if (moe) return attention + static_cast<double>(s.experts) + m * d;
  if (!s.gated_mlp) return attention + f + d + m * (d + f);
  return attention + 2 * f + d + m * ((q.matmul_copy_bytes > 0 ? 2 : 1) * d + f);
}

}  // namespace

BlockActivations shardlab_block_elements(const TransformerShape& s, const ActivationQuery& q, bool moe) {
  const double d = s.d_model, t = q.tensor, qkv = static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim);
  const double heads_out = static_cast<double>(s.heads * s.head_dim), m = kept_matmul_input(q);
  const double stats = s.layer_norm ? 4 : 2;  // per norm: mean and rstd, or rstd
  BlockActivations b;
  // The residual stream (the block's input and h, kept by the norms that read them) and the
  // norms' outputs, kept by the matmuls that read them. A residual add, an all_reduce and a
  // reduce_scatter keep nothing, so each region's exit leaves nothing behind. Under sequence
  // parallelism the stream and the norms are divided, and the matmuls keep the all_gathered
  // norm outputs, full width.
  if (q.tensor > 1 && q.sequence_parallel) {
    b.replicated = 2 * m * d;
    b.divided = (2 * d + stats) / t;
  } else {
    b.replicated = (2 + 2 * m) * d + stats;
  }
  // Attention: Q/K/V after RoPE as its matmuls read them, the heads' output as the output
  // projection keeps it, and what attention keeps for backward. Context parallelism's
  // attention keeps Q/K/V and its output in fp32 (a bf16 projection its own copy beside).
  const bool context = q.context > 1;
  const double heads_kept = context ? 1 + (q.matmul_copy_bytes > 0 ? m : 0) : m;
  b.divided += ((context ? 1 : m) * qkv + heads_kept * heads_out + attention_saved_elements(s, q)) / t;
  if (!moe) {
    b.divided += hidden_per_row(s, q) / t;
    return b;
  }
  // MoE: the router's probabilities (softmax's output, and z-loss's own) and the top-k
  // gates, then per capacity slot the dispatched row (as the experts' matmul keeps it), the
  // expert's hidden activations and its output, kept by the combine.
  const double slots = expert_slots_per_token(s, q);
  b.replicated += 2.0 * static_cast<double>(s.experts) + static_cast<double>(s.top_k) + slots * (1 + m) * d;
  b.divided += slots * hidden_per_row(s, q) / t;
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
  // A block's backward peaks in its MLP (the last block's first, on top of every kept
  // tensor; under remat on top of the block it recomputed), beside the gradient of the
  // block's output (D): SwiGLU's backward holds its input's gradient (F) and makes the
  // gate's and the up-projection's (2 F), freeing the product the down-projection kept;
  // GELU's output projection holds its input's gradient (F) and its weight's (D x F for the
  // whole microbatch) before that is accumulated.
  const double f = static_cast<double>(s.d_ff) / t, per_token_weight = d * f / std::max(1.0, q.tokens);
  const double mlp = s.gated_mlp ? d + 3 * f - kept_matmul_input(q) * f : d + f + per_token_weight;
  // Under bf16 GELU's output projection also converts the output gradient it multiplies
  // (D, at the copies' bytes; its input it kept converted).
  const double copies = q.matmul_copy_bytes / sizeof(float);
  const double dense_transient = mlp + (s.gated_mlp ? 0 : copies * d);
  // An MoE block's backward peaks in its experts: the same per capacity slot as a dense
  // MLP's per row (the experts' weight gradients, [E/e, D, F/t], made at once), beside the
  // block output's gradient (D per token) and, under expert parallelism, the gradient rows
  // the all_to_all exchanges (D per slot).
  double moe_transient = 0;
  if (q.moe_layers > 0) {
    const double slots = expert_slots_per_token(s, q), local_experts = static_cast<double>(s.experts) / q.expert;
    const double per_slot = s.gated_mlp ? d + 3 * f - kept_matmul_input(q) * f : d + f + copies * d;
    const double weights = s.gated_mlp ? 0 : local_experts * d * f / std::max(1.0, q.tokens);
    moe_transient = d + slots * per_slot + weights + (q.expert > 1 ? slots * d : 0);
  }
  // Or it peaks in attention's backward, once the block's MLP (or experts) and output
  // projection have freed what they kept: the residual's gradient (D), the heads' output
  // gradient and its copy, dQKV (fp32), and the largest row block's scores gradient and its
  // copy. At small D (and long T) that is the larger. Under a context axis the ring's
  // backward (parallel/context/context_parallel.cpp) holds instead, beside dQKV, four K/V
  // blocks' worth (the gradient share of the block in hand, the sum travelling on, the sum
  // arriving, the next block) and one key block's scores and their gradient, with copies;
  // all-gathered, the gradients of every rank's block (c of them) in place of the four.
  const double qkv_width = static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim) / t;
  const double heads_out = static_cast<double>(s.heads * s.head_dim) / t, m = kept_matmul_input(q);
  const double kv_width = 2.0 * static_cast<double>(s.kv_heads * s.head_dim) / t;
  const double kv_heads = static_cast<double>(s.kv_heads) / t;
  const double kv_blocks = q.context_allgather ? q.context : 4;
  const double scores = q.context > 1 ? 2 * kv_heads * static_cast<double>(q.sequence) / q.context + kv_blocks * kv_width
                                      : kv_heads * attention_block_scores(q.sequence);
  const double attention = d + (1 + copies) * heads_out + qkv_width + (1 + copies) * scores - m * (d + heads_out);
  const double backward_transient =
      std::max({dense_layers > 0 ? std::max(dense_transient, attention - hidden_per_row(s, q) / t) : 0.0, moe_transient,
                q.moe_layers > 0 ? attention - (moe.total() - dense.total() + hidden_per_row(s, q) / t) : 0.0});
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
  // GPT's token rows before the positions are added, and a vocabulary-parallel
  // embedding's partial sum before its reduction: where one stage embeds and holds the
  // head (no pipe axis) one row each per token stays alive through backward (test_nn
  // measures it), but a pipeline's first stage has freed them by its backward's peak (the
  // layout matrix measures that).
  if (q.embedding && q.head) per_token += (s.learned_positions > 0 ? d : 0) + (q.tensor > 1 ? d : 0);
  if (!q.head) per_token += block_input;  // the stage's output, until the next stage's gradient returns
  // The last stage's head -- final block output, final norm (as the head's matmul keeps it)
  // and cross entropy's softmax (V/t; the logits are freed once it is taken) -- and, as
  // backward starts, the logits' gradient: gone before the first block is recomputed.
  // The fused head keeps no logits: while its backward runs, a chunk and its operand copy,
  // the input's gradient (D per token) and the weight's, [V/t, D], which it fills chunk by chunk.
  const double vocab = static_cast<double>(s.vocab) / t;
  const bool fused = q.fused_head_chunk_bytes > 0;
  // Unfused, the head peaks as cross entropy's backward makes the logits' gradient beside
  // its softmax (2 V), or in the head matmul's backward: the logits' gradient, its copy
  // under bf16, the input's gradient (D) and the weight's ([V/t, D], not per token).
  const double head_matmul = vocab * (1 + copies) + d + vocab * d / std::max(1.0, q.tokens);
  const double head = !q.head ? 0
                              : (fused ? 3 * d : (1 + kept_matmul_input(q)) * d + std::max(2 * vocab, head_matmul)) +
                                    (s.layer_norm ? 2 : 1);
  const double chunk = q.head && fused ? q.fused_head_chunk_bytes * (1 + q.matmul_copy_bytes / sizeof(float)) +
                                             sizeof(float) * vocab * d
                                       : 0;
  const double bytes = sizeof(float) * q.tokens;
  // A zero-bubble pipeline's deferred weight gradients convert the fused Q/K/V
  // projection's output gradient again when they run (its input is kept converted).
  const double deferred = !q.deferred_weight_gradients ? 0.0
                                                       : q.matmul_copy_bytes * q.tokens *
                                                             static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim) / t;
  // Tensors waiting for zero-bubble weight passes: every earlier input pass's, and the output
  // gradients the pass under way has deferred so far (its inputs it keeps anyway). The
  // last stage's head too: the logits' gradient and the final norm's output, or the fused
  // head's whole weight gradient.
  const auto weight_pass = [&](bool gradients_only) {
    double e = dense_layers * weight_pass_elements(s, q, false, gradients_only) +
               q.moe_layers * weight_pass_elements(s, q, true, gradients_only);
    if (q.head) e += fused ? vocab * d / std::max(1.0, q.tokens) : vocab + (gradients_only ? 0.0 : kept_matmul_input(q) * d);
    return e;
  };
  const double waiting = weight_pass(false) * q.awaiting_weight + (q.deferred_weight_gradients ? weight_pass(true) : 0.0);
  return {.kept = bytes * (per_token * q.in_flight + waiting),
          .head = bytes * head + chunk + deferred,
          .recompute = bytes * recompute,
          .backward = q.remat == nn::Remat::None ? bytes * backward_transient : 0.0,
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
  return state + std::max({a.kept + std::max(a.head, a.backward) + (grads_held ? grads : 0.0), recomputing, grads});
}

}  // namespace shardlab::cost
