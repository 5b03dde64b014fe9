// Activation memory as shardlab's own autograd holds it, per rank of a layout: what
// `train_gpt` and `shardlab-plan train --cluster local` estimate, next to the tracker's
// measured peak (framework/memory.h).
//
// The book's count (model/transformer.h, saved_activations_per_token_layer) is what a fused
// GPU kernel set keeps: about 16-20 D per token and layer, no attention probabilities,
// no logits. shardlab's CPU autograd keeps more, and this file says exactly what:
//
// - A graph node holds no input's data (framework/autograd.h, Edge): each op's backward
//   keeps what it reads. So a block keeps its input and h (read by the norms' backward),
//   both norm outputs (read by the Q/K/V and the MLP's first matmuls), Q/K/V after RoPE
//   (attention), the heads' output (the output projection) and the MLP's hidden
//   activations (GELU: its input and output, 2F; SwiGLU: gate, up and their product, 3F),
//   plus the norms' row statistics. A residual add, a scale, a reshape and a collective
//   keep nothing, so the projections' outputs and each region's exit are freed at once.
// - A matmul keeps its input as it multiplied it (framework/ops/matmul.h): in fp32, or as
//   the bf16 copy oneDNN's bf16 kernels read (half the bytes; `matmul_copy_bytes` 2), or a
//   bf16-rounded fp32 copy (the rounded path, same bytes as fp32).
// - Attention keeps its probabilities: N x (causal row blocks of 64) per token, about
//   N (T + 64) / 2, divided by the tensor axis. Under context parallelism (parallel/context)
//   every tensor follows the rank's T/c positions, and attention keeps no probabilities
//   (ops/block_attention.h): the packed K/V (2 K H), the log-sum-exp per query row and head
//   (N) and, all-gathering, every rank's K/V block too (c x 2 K H).
// - An MoE layer's experts see every capacity slot: s = E ceil(C T k / E) / T slots per
//   token (dropless: E), each keeping its dispatched row (as the experts' matmul keeps it),
//   hidden activations and output; the all_to_all buffers of expert parallelism keep
//   nothing beyond them.
// - Tensor parallelism divides the heads' and the MLP's part; the residual stream and the
//   norm outputs stay full width on every rank. Sequence parallelism divides those too,
//   except the all_gathered norm outputs the column-parallel matmuls keep.
// - The head keeps the final norm's output, the logits and cross entropy's softmax (V
//   each, V/t under tensor parallelism), and its backward adds the logits' gradient.
//   The fused head (framework/ops/linear_cross_entropy.h) keeps none of those three: one
//   chunk of logits while it runs (and its bf16 copy), the input's gradient (D) and the
//   weight's ([V/t, D], filled chunk by chunk).
// - Backward peaks either as it starts (the head's tensors) or inside a block -- the last
//   block's first, on top of every kept tensor (without remat), or the recomputed block's --
//   where that block's backward holds the most: its MLP, attention's dQKV and scores
//   gradient, an MoE block's experts (per capacity slot), or a context axis's K/V ring.
//   Under bf16 a matmul's backward also converts the output gradient it multiplies while
//   it runs (its input is kept converted), and a zero-bubble schedule's deferred weight
//   gradients convert the fused Q/K/V projection's output gradient again.
// - Rematerialisation keeps each block's input (full) or also its Linear outputs
//   (save-matmul, save-mlp-matmul), plus one block's full set while it is recomputed and
//   that block's own backward transient (the MLP hidden activations' gradients, 2 F).
// - A pipeline stage keeps the activations of every microbatch in flight (1F1B: up to
//   pipe - stage of them); only the first stage embeds and only the last holds the head.
//   Callers price each moment the stage's schedule starts a backward at
//   (parallel::backward_moments): `in_flight`, the zero-bubble weight passes still waiting
//   (`awaiting_weight`), and the gradients only once one exists (shardlab_peak_bytes'
//   grads_held) -- a stage's first backward starts before any does.
// - The embedding's own rows (GPT's tokens before the positions are added, a
//   vocabulary-parallel embedding's partial sum) stay alive through backward where one
//   stage embeds and holds the head, not on a pipeline's first stage.
//
//   ActivationQuery q{.tokens = 2048, .sequence = 256, .layers = 4};
//   double bytes = shardlab_activation_bytes(shape_of(config), q).peak();
#pragma once

#include <algorithm>

#include "framework/nn/config.h"
#include "parallel/cost/model/transformer.h"

namespace shardlab::cost {

// One rank's share of a training step's activations.
struct ActivationQuery {
  double tokens = 0;        // one microbatch of this rank's data replica (its T/c of each sequence)
  int64_t sequence = 0;     // tokens per sequence (attention's T, the whole sequence)
  nn::Remat remat = nn::Remat::None;
  int tensor = 1;           // the tensor axis
  bool sequence_parallel = false;
  int expert = 1;           // the expert axis (adds all_to_all buffers when > 1)
  double layers = 0;        // this rank's blocks (L / pipe)
  double moe_layers = 0;    // of which MoE blocks
  bool embedding = true;    // this rank's stage embeds (the first)
  bool head = true;         // this rank's stage holds the head and the loss (the last)
  double in_flight = 1;     // microbatches whose activations are alive at once
  // Microbatches whose zero-bubble weight pass is still to run: each Linear's weight
  // gradient waits with its output gradient and its input as the matmul read it.
  double awaiting_weight = 0;
  double capacity_factor = 1.25;  // MoE slots per expert (0: dropless)
  // Bytes per element of the operand copies a bf16 matmul makes while it runs: 0 under
  // fp32, 2 with oneDNN's bf16 kernels, 4 with fp32 kernels on rounded copies.
  double matmul_copy_bytes = 0;
  // A zero-bubble pipeline's deferred weight-gradient pass: under bf16 each converts its
  // output gradient and input again when it runs, beside the tensors still waiting.
  bool deferred_weight_gradients = false;
  // Bytes of the fused head's chunk of logits (min(64 MiB, tokens x V/t x 4)); 0: the head
  // is not fused and keeps the logits (nn::fuses_head decides).
  double fused_head_chunk_bytes = 0;
  int context = 1;                 // the context axis
  bool context_allgather = false;  // its attention all-gathers K/V (else a ring)
};

// Elements one token keeps in one block (dense or MoE), as tensor parallelism splits them.
struct BlockActivations {
  double replicated = 0;  // full width on every tensor rank (the residual stream, norms)
  double divided = 0;     // already divided by the tensor axis (heads, MLP, probabilities)
  double total() const { return replicated + divided; }
};
BlockActivations shardlab_block_elements(const TransformerShape& s, const ActivationQuery& q, bool moe);

// Activation bytes (fp32) of one rank in the two moments backward can peak at.
struct ActivationBytes {
  double kept = 0;       // every in-flight microbatch's kept tensors
  double head = 0;       // as backward starts: the head's tensors and the logits' gradient
  double recompute = 0;  // under remat: one block recomputed, its tensors alive at once
  double backward = 0;   // without remat: a block's backward under way (its MLP's gradients)
  // Of `kept`, what the microbatch backward runs through keeps in its `layers` blocks:
  // backward frees it block by block as the blocks' gradients accumulate.
  double kept_backward = 0;
  double layers = 1;
  // The larger moment, activations alone (shardlab_peak_bytes adds the gradients).
  double peak() const { return kept + std::max({head, recompute, backward}); }
};
ActivationBytes shardlab_activation_bytes(const TransformerShape& s, const ActivationQuery& q);

// The peak of live bytes of one rank whose gradients are freed after each step: the
// largest of four moments -- backward starting (the head's tensors; gradients only from
// earlier microbatches, `grads_held`), under remat the last block recomputed first (every
// block's kept tensors, few gradients yet) and the first block recomputed last (one
// block's kept tensors, the other blocks' gradients), and the whole gradient once the
// activations are freed.
// `state`: parameters, optimizer state and gathered buffers, alive throughout.
double shardlab_peak_bytes(double state, double grads, bool grads_held, const ActivationBytes& a);

// The attention probabilities one token keeps per head: the causal row blocks' widths
// averaged over a sequence of `sequence` tokens (framework/ops/attention.cpp).
double attention_probability_elements(int64_t sequence);

}  // namespace shardlab::cost
