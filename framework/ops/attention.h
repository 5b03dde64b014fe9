// Causal self-attention, multi-head or grouped-query, on a fused QKV buffer.
//
// qkv[B, T, (N + 2K) * H] holds, per position, the N query heads, then K key heads, then
// K value heads (the output of one fused projection). Query head n attends with kv head
// n / (N / K). Output y[B, T, N * H] is already in the layout the output projection
// reads, so no transposes are materialised. The [T, T] probabilities are kept for
// backward as the P V matmul reads them (bf16 under oneDNN's bf16 kernels); they are
// computed in blocks of query rows so that scores above the diagonal block are never
// computed (at T = 256 that saves about 40% of the attention FLOPs).
#pragma once

#include "framework/tensor.h"

namespace shardlab::ops {

// Query rows per block of the causal kernel: a block of rows [r0, r1) computes and keeps
// probabilities for keys [0, r1) only.
constexpr int64_t kAttentionRowBlock = 64;

Tensor causal_attention(const Tensor& qkv, int n_heads, int n_kv_heads);

// Softmax over the last dim (a standalone op, used by tests and samplers).
Tensor softmax(const Tensor& x);

}  // namespace shardlab::ops
