// Transformer arithmetic (book chapter "transformers"): parameter counts by part, FLOPs per
// token, KV-cache bytes, and training memory under each rematerialisation policy.
//
// Dimension letters: L layers, D model width, F MLP hidden (per expert), N query heads,
// K key/value heads (K < N: grouped-query attention), H head dim, V vocab, E experts
// (0 = dense), k experts per token, T context (sequence length attention spans).
//
//   TransformerShape s = model_preset("llama3-70b");
//   ParamCounts p = count_params(s);                         // p.total ~ 70.55e9
//   double flops = train_flops_per_token(s, nn::Remat::None);  // ~ 6 p.matmul + 12 T N H L
//   double kv = kv_bytes_per_token(s, DType::kInt8);        // 2 L K H = 163,840 B
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/nn/config.h"
#include "parallel/cost/network/wire_format.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {

struct TransformerShape {
  std::string name;
  int64_t layers = 0;    // L
  int64_t d_model = 0;   // D
  int64_t d_ff = 0;      // F (per expert for MoE)
  int64_t heads = 0;     // N
  int64_t kv_heads = 0;  // K
  int64_t head_dim = 0;  // H
  int64_t vocab = 0;     // V
  int64_t context = 0;   // T used for attention FLOPs (training / prefill length)
  int64_t experts = 0;   // E; 0 = dense MLP
  int64_t top_k = 1;     // experts per token when E > 0
  int64_t moe_every = 1; // layers moe_every-1, 2 moe_every-1, ... have experts; the rest a dense MLP
  int64_t learned_positions = 0;  // rows of a learned position table (GPT-2); 0 = RoPE
  bool gated_mlp = true;       // SwiGLU (3 matrices) vs GELU (2)
  bool layer_norm = false;     // LayerNorm (weight + bias) vs RMSNorm (weight)
  bool bias = false;           // biases on every linear layer (GPT-2)
  bool tied_embeddings = false;

  int64_t moe_layers() const { return experts > 0 ? layers / moe_every : 0; }
  // Throws UserError naming a non-positive size or K not dividing N.
  void validate() const;
  std::string describe() const;  // one line, e.g. "llama3-70b: L=80 D=8192 ..."
};

// Named real models (gpt2-124m ... llama3-405b, mixtral-8x7b) and shardlab's own presets.
TransformerShape model_preset(const std::string& name);  // throws UserError listing names
std::vector<std::string> model_preset_names();
// The shape of a framework model config (what train_gpt builds).
TransformerShape shape_of(const nn::ModelConfig& config);
// The model shardlab's own nn builds for a shape (shape_of's inverse): GPT for a GELU MLP
// with LayerNorm, biases, tied embeddings and a learned position table of T rows, LLaMA for
// SwiGLU, RMSNorm and RoPE. nullopt for a shape neither builds (e.g. a head dim other than
// D / N).
std::optional<nn::ModelConfig> model_config_of(const TransformerShape& shape);

// Parameter counts. For MoE `mlp` holds all E experts of the MoE layers (and the dense
// layers' MLPs); `active` counts k of the E.
struct ParamCounts {
  double attention = 0;    // Q, K, V, O projections (+ biases), all layers
  double mlp = 0;          // MLP or experts, all layers
  double experts = 0;      // of mlp, the MoE layers' experts (what expert parallelism splits)
  double router = 0;       // D x E per MoE layer
  double norms = 0;        // per-layer and final norms
  double embedding = 0;    // token table V x D (also the output layer when tied)
  double unembedding = 0;  // separate output projection V x D (0 when tied)
  double positions = 0;    // learned position table
  double total = 0;
  double active = 0;       // parameters a token touches (MoE: k of E experts)
  double matmul = 0;       // active parameters used in matmuls: the N of "6N"
};
ParamCounts count_params(const TransformerShape& s);
// A model given by its parameter count P and every dimension but L (book transformers.md:
// P = L x per-layer + embeddings): `shape` with the layer count whose count_params is
// nearest P. UserError when P does not reach one layer plus the embeddings.
//   shape_for_params(70e9, llama3_70b_without_layers).layers == 80
TransformerShape shape_for_params(double params, TransformerShape shape);

// FLOPs per token. Matmuls: 2 per parameter forward, 4 backward. Attention scores and
// values: 4 T N H per layer forward (QK^T and AV over the full T x T square; kernels that
// skip the causal half do half). Training = 3 x forward; full remat adds one forward.
double forward_flops_per_token(const TransformerShape& s, int64_t context);
double attention_flops_per_token(const TransformerShape& s, int64_t context);  // forward only
// Remat is the framework's policy (nn::Remat, framework/nn/config.h); save-mlp-matmul is
// the book's, keeping only the MLP matmul outputs (D + 2F).
double train_flops_per_token(const TransformerShape& s, nn::Remat remat = nn::Remat::None);
// The 6N rule: 6 x params x tokens (the book's estimate of a training run's FLOPs).
double train_flops(double params, double tokens);
// Context length at which attention FLOPs equal the Q/K/V/O projection FLOPs: D (N+K) / N
// (T = 2D for multi-head attention).
double attention_crossover_context(const TransformerShape& s);
// Context length at which attention's dot products (4 T N H a layer, forward) equal all of a
// layer's matmuls (2 x its active matmul parameters: projections, MLP, router; the
// unembedding left out): T = layer matmul params / (2 N H) -- the book's T = 8D for F = 4D
// and N H = D ("dot-product attention FLOPs only become dominant during training once T > 8D").
double attention_matmul_crossover_context(const TransformerShape& s);

// The element-wise work of a training step, in elements read or written per token and
// layer, forward and backward together (backward about twice the forward), split into
// what every tensor-parallel rank repeats and what it divides: replicated, two norms,
// two residual adds and the head split/merge copies of Q, K, V and the attention output,
// about 18 D forward; divided, the attention scores' scale, mask and softmax over the
// T x T square (4 N T) and the MLP's activation (2 F, gated 3 F). This work runs at
// memory bandwidth, not at GEMM FLOP/s: the part of a step that a FLOP count misses.
struct ElementwiseTraffic {
  double replicated = 0;  // elements per token and layer
  double divided = 0;     // elements per token and layer, before the tensor split
};
ElementwiseTraffic elementwise_elements_per_token_layer(const TransformerShape& s, int64_t context);

// KV cache: 2 L K H elements per token.
double kv_bytes_per_token(const TransformerShape& s, DType kv);

// Activations saved for backward, elements per token per layer (bf16 bytes = 2 x this).
// none counts: norm inputs and outputs 4D, Q/K/V/attention output 2NH + 2KH, MLP 4F gated
// (gate, up, activation, product) or 2F plain; attention probabilities are not stored
// (fused attention keeps only row statistics). ~19 D for LLaMA-2 13B, the book's "~20".
double saved_activations_per_token_layer(const TransformerShape& s, nn::Remat remat);
// bytes = tokens x layers x width x bytes(dtype)
double activation_bytes(double tokens, int64_t layers, double width, DType dtype);

// Bytes per parameter of each piece of training state.
struct TrainingPrecision {
  DType params = DType::kBf16;
  DType grads = DType::kBf16;
  double optimizer_bytes = 8;  // Adam: fp32 first and second moments (add 4 for fp32 master)
  DType activations = DType::kBf16;
  DType compute = DType::kBf16;  // the matmul units used
  // What the gradient reductions and parameter gathers carry (network/wire_format.h); the
  // stored params and grads above stay as they are.
  WireDtypes wire;
};
// fp32 everywhere (shardlab on CPU): 4-byte params/grads/activations and wires, Adam 8.
TrainingPrecision fp32_training();

struct TrainingMemory {
  double params = 0, grads = 0, optimizer = 0, activations = 0;
  // When set, the peak of live bytes of an allocator that frees gradients between steps
  // (shardlab's, model/autograd_activations.h: shardlab_peak_bytes); otherwise every piece at once.
  double peak = 0;
  double total() const { return peak > 0 ? peak : params + grads + optimizer + activations; }
};
// The whole (unsharded) model training on `tokens` tokens at once.
TrainingMemory training_memory(const TransformerShape& s, double tokens, nn::Remat remat,
                               const TrainingPrecision& precision);

}  // namespace shardlab::cost
