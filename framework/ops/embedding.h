// Token embedding lookup and rotary position embedding (RoPE).
#pragma once

#include <cstdint>
#include <span>

#include "framework/tensor.h"

namespace shardlab::ops {

// y[B, T, D] = w[ids[b, t]]; w[V, D], ids has B * T entries in [0, vocab) (vocab 0: V).
// A vocab-parallel shard w holds rows [first_row, first_row + V) of a table of `vocab`
// rows: ids outside that slice give zero rows and no gradient.
Tensor embedding(const Tensor& w, std::span<const int32_t> ids, int64_t B, int64_t T, int64_t first_row = 0,
                 int64_t vocab = 0);

// Rotates the query and key heads of a fused qkv[B, T, (N + 2K) * H] buffer by position
// (pos_offset + t), interleaved pairs (2i, 2i+1) at frequency theta^(-2i/H), as in
// Meta's LLaMA. Value heads pass through unchanged.
Tensor rope(const Tensor& qkv, int n_heads, int n_kv_heads, float theta = 10000.0f, int64_t pos_offset = 0);
// The same with row t at positions[t] (T of them): a context-parallel rank's slice of a
// sequence is not one run of positions.
Tensor rope(const Tensor& qkv, int n_heads, int n_kv_heads, float theta, std::span<const int64_t> positions);

}  // namespace shardlab::ops
