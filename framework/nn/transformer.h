// Transformer language models: GPT-2 style and LLaMA-3 style from one ModelConfig.
//
//   GPT-2:   x = wte[ids] + wpe[t];  blocks: x += attn(ln1(x)); x += mlp(ln2(x))   (LayerNorm, GELU)
//   LLaMA-3: x = wte[ids];           blocks: x += attn(rms1(x)) with RoPE and GQA; x += swiglu(rms2(x))
//   logits = norm_f(x) · W_out^T with W_out = wte (tied) for GPT, a separate lm_head for LLaMA.
//   The training loss fuses the head and cross-entropy where the logits would be large
//   (config.fused_head, ops/linear_cross_entropy.h): they are never held whole.
//
// The model knows nothing of parallelism; parallel/ applies it from outside.
//
//   Transformer model(ModelConfig::preset("gpt-small"));
//   initialize(model, seed);
//   Tensor loss = model.loss(inputs, targets, B, T);   // ids are int32, B * T of each
//   loss.backward();
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "framework/nn/attention.h"
#include "framework/nn/config.h"
#include "framework/nn/layers.h"
#include "framework/nn/moe.h"

namespace shardlab::nn {

// Whether the training loss fuses its head for `rows` rows of input against a weight of
// `vocab_rows` rows (this rank's, under tensor parallelism): `mode`, and for Auto whether
// the fp32 logits would pass one fused chunk (ops::linear_cross_entropy_saves_memory).
bool fuses_head(FusedHead mode, int64_t rows, int64_t vocab_rows);

class Block : public Module {
 public:
  // Block `layer` of a model with `config`; an MoE layer (config.is_moe_layer) reports to `moe`.
  Block(Module& parent, const std::string& name, const ModelConfig& config, int64_t layer,
        std::shared_ptr<MoeState> moe_state);
  Tensor operator()(const Tensor& x) const;  // honours config.remat and the forward hooks
  Tensor forward(const Tensor& x) const;     // never rematerialises
  Tensor decode(const Tensor& x, KVCache& cache, int layer) const;

  Norm norm1;
  Attention attn;
  Norm norm2;
  std::unique_ptr<Mlp> mlp;        // GPT
  std::unique_ptr<SwiGlu> swiglu;  // LLaMA
  std::unique_ptr<Moe> moe;        // an MoE block's experts, in place of either
  Remat remat;

 private:
  Tensor feed_forward(const Tensor& x) const;
};

class Transformer : public Module {
 public:
  explicit Transformer(const ModelConfig& config);  // validates config
  Tensor logits(std::span<const int32_t> ids, int64_t B, int64_t T) const;  // [B * T, V]
  // Mean cross-entropy over targets != -1, or sum / denominator when it is given.
  Tensor loss(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T,
              double denominator = 0.0) const;
  // Inference: logits [B * n, V] of n new positions, using and extending the cache.
  Tensor decode(std::span<const int32_t> ids, int64_t B, int64_t n, KVCache& cache) const;

  // The pieces loss() runs in order, for a pipeline stage (parallel/pipeline) that holds
  // only some of them: the embedding [B * T, D], the blocks, and the head's loss.
  // left_pad (inference, one per row): the row's leading padding positions; its learned
  // positions count from its first real token.
  Tensor embed(std::span<const int32_t> ids, int64_t B, int64_t T, int64_t pos_offset = 0,
               std::span<const int64_t> left_pad = {}) const;
  Tensor head_loss(const Tensor& x, std::span<const int32_t> targets, double denominator = 0.0) const;

  const ModelConfig config;
  // The MoE layers' statistics and auxiliary-loss scale (moe.h); unused by a dense model.
  const std::shared_ptr<MoeState> moe_state = std::make_shared<MoeState>();
  Embedding wte;
  std::unique_ptr<Embedding> wpe;  // GPT only
  std::vector<std::unique_ptr<Block>> blocks;
  Norm norm_f;
  std::unique_ptr<Linear> lm_head;  // LLaMA only (GPT ties to wte)

  // Where tensor parallelism (parallel/tensor/tensor_parallel.cpp) changes the model as a
  // whole; unset in a model nobody parallelised.
  struct TensorParallelHooks {
    // The head's output is not the full logits under a vocab-parallel layout: `loss`
    // replaces ops::cross_entropy on it, `logits` turns it into the logits that logits()
    // and decode() return.
    std::function<Tensor(const Tensor& head_output, std::span<const int32_t> targets, double denominator)> loss;
    // The same for the fused head: replaces ops::linear_cross_entropy(head_input, weight, ...)
    // with this rank's rows of the weight.
    std::function<Tensor(const Tensor& head_input, const Tensor& weight, std::span<const int32_t> targets,
                         double denominator)>
        fused_loss;
    Hook logits;
    // Applied by a pipeline stage (parallel/pipeline) to the activation it receives, where
    // the first stage's embedding ran its hooks: sequence parallelism marks the stream as
    // split there.
    Hook stage_input;
  } tensor_parallel;
  // Set by context parallelism, with the same hooks on every block's attention: the
  // positions of this rank's rows of each sequence. Unset: rows are positions 0..T-1.
  std::shared_ptr<const ContextParallelHooks> context_parallel;

 private:
  Tensor head_input(const Tensor& x) const;  // norm_f(x) as [rows, D]
  Tensor head_weight() const;                // W_out as the head multiplies it (this rank's rows)
  Tensor head(const Tensor& x) const;
  Tensor head_output(std::span<const int32_t> ids, int64_t B, int64_t T) const;  // embed, blocks, head
};

// A model whose parameters have shapes but no storage yet (DeferParameters, module.h): how
// a model is built for parallel::parallelize(), which allocates and initialises what each
// rank keeps, or for anything that needs only its shapes.
std::unique_ptr<Transformer> deferred_transformer(const ModelConfig& config);

}  // namespace shardlab::nn
