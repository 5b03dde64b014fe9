// Basic layers. Each registers itself with its parent under a name, so a model reads
// as a list of members:  Linear fc{*this, "fc", D, F};
#pragma once

#include <cstdint>
#include <span>

#include "framework/nn/module.h"

namespace shardlab::nn {

// y = x · W^T + b with W[out, in] (PyTorch layout).
class Linear : public Module {
 public:
  Linear(Module& parent, const std::string& name, int64_t in, int64_t out, bool bias, float init_std = 0.02f);
  Tensor operator()(const Tensor& x) const;
  // The weight as operator() multiplies it (through parameter_hook), for an op that takes
  // the matrix itself: the fused head (ops/linear_cross_entropy.h).
  Tensor used_weight() const { return use("weight", weight); }
  Tensor weight, bias;
  // Where tensor parallelism (parallel/tensor/tensor_parallel.cpp) changes this layer;
  // unset in a model nobody parallelised.
  struct TensorParallelHooks {
    // Applied to x · W^T before the bias is added: a row-parallel layer sums its shards'
    // partial products here (Megatron's g), so the bias is added once.
    Hook reduce_partial;
    // Replaces the product x · W^T + b (weight and bias as parameter_hook left them):
    // the collective matmul (parallel/tensor/collective_matmul.h) gathers x inside it.
    std::function<Tensor(const Tensor& x, const Tensor& weight, const Tensor& bias)> product;
  } tensor_parallel;
};

// Lookup table w[V, D]. A vocab-parallel layout keeps rows [first_row, first_row + V/t)
// of the `vocab` rows and gets zeros for ids outside them (ops::embedding).
class Embedding : public Module {
 public:
  Embedding(Module& parent, const std::string& name, int64_t vocab, int64_t dim);
  Tensor operator()(std::span<const int32_t> ids, int64_t B, int64_t T) const;
  Tensor weight;
  int64_t vocab;
  int64_t first_row = 0;
};

// LayerNorm (weight and bias, GPT-2) or RMSNorm (weight only, LLaMA) over the last dim.
class Norm : public Module {
 public:
  enum Kind { Layer, Rms };
  Norm(Module& parent, const std::string& name, int64_t dim, Kind kind, float eps);
  Tensor operator()(const Tensor& x) const;
  Tensor weight, bias;
  Kind kind;
  float eps;
};

// GPT-2 MLP: fc2(gelu(fc(x))).
class Mlp : public Module {
 public:
  Mlp(Module& parent, const std::string& name, int64_t dim, int64_t hidden, float out_std);
  Tensor operator()(const Tensor& x) const;
  Linear fc, fc2;
};

// LLaMA MLP: down(silu(gate(x)) * up(x)).
class SwiGlu : public Module {
 public:
  SwiGlu(Module& parent, const std::string& name, int64_t dim, int64_t hidden, float out_std);
  Tensor operator()(const Tensor& x) const;
  Linear gate, up, down;
};

}  // namespace shardlab::nn
