// Causal self-attention module: fused QKV projection, optional RoPE, output projection.
// Multi-head (K = N) or grouped-query (K < N). Shapes: x[B, T, D] -> y[B, T, D].
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "framework/nn/config.h"
#include "framework/nn/layers.h"

namespace shardlab::nn {

// Where context parallelism (parallel/context/context_parallel.h) changes the model: each
// rank holds a slice of every sequence through the whole model. Set on the Transformer
// (its positional embedding) and on every Attention (RoPE and the attention itself).
struct ContextParallelHooks {
  // The global positions of this rank's `length` rows of each sequence.
  std::function<std::vector<int64_t>(int64_t length)> positions;
  // Replaces ops::causal_attention: this rank's queries attend to the keys of the whole
  // sequence, which the other ranks of the context axis hold.
  std::function<Tensor(const Tensor& qkv, int n_heads, int n_kv_heads)> attention;
};

// Keys and values of earlier positions for incremental decoding, per layer.
struct KVCache {
  std::vector<Tensor> k, v;  // per layer [B, context, K * H]
  int64_t length = 0;        // positions filled
  // Per row: its leading positions that hold left padding (a batch of prompts of unequal
  // lengths is padded on the left to one length); they are never attended to, and the
  // row's own positions count from the first real token.
  std::vector<int64_t> pad;

  // kv_heads: the K this rank keeps (a tensor-parallel layout keeps some; 0: all of them).
  KVCache(const ModelConfig& config, int64_t batch, int64_t kv_heads = 0);
};

class Attention : public Module {
 public:
  Attention(Module& parent, const std::string& name, const ModelConfig& config);
  Tensor operator()(const Tensor& x) const;
  // Inference only: attends new positions x[B, n, D] to the cache (and appends them).
  Tensor decode(const Tensor& x, KVCache& cache, int layer) const;

  // wqkv's rows are the query heads, then the key heads, then the value heads, H rows each
  // (Q[N*H]; K[K*H]; V[K*H]): a tensor-parallel layout keeps a subset of whole heads of each
  // and sets n_heads / n_kv_heads to the counts it kept.
  Linear wqkv, wo;
  int64_t n_heads, n_kv_heads, head_dim;
  bool rope;
  float rope_theta;
  std::shared_ptr<const ContextParallelHooks> context_parallel;  // unset: whole sequences
};

}  // namespace shardlab::nn
