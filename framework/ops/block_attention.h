// Causal attention one block of keys at a time, with the online-softmax (log-sum-exp)
// merge of flash attention: the kernels that context parallelism (parallel/context) runs
// on each key/value block a ring step or an all-gather brings, and a single-process op
// built from them.
//
// Rows and positions are decoupled: a buffer's rows hold runs of consecutive sequence
// positions (`PositionSpan`), so a rank that holds chunks 1 and 6 of a sequence cut in 8
// (context parallelism's head-tail balance) attends exactly as the whole sequence would.
// Query position p sees key position q when q <= p.
//
//   OnlineAttention attention(heads, qkv);              // qkv[B, Tq, (N + 2K) * H]
//   for (each key/value block kv[B, Tk, 2 * K * H] with its spans) attention.attend(q_spans, kv, kv_spans);
//   Tensor y = attention.finish();                       // [B, Tq, N * H]
//
// Backward recomputes the probabilities from the saved log-sum-exp, block by block
// (BlockAttentionBackward), so nothing quadratic in the sequence is kept.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/ops/matmul.h"
#include "framework/precision.h"
#include "framework/tensor.h"

namespace shardlab::ops {

// `length` consecutive positions starting at `position`, in rows [row, row + length).
struct PositionSpan {
  int64_t row = 0;
  int64_t position = 0;
  int64_t length = 0;
};

// The head counts of a fused qkv buffer: N query heads, K key/value heads of H each.
struct AttentionHeads {
  int64_t B = 0, N = 0, K = 0, H = 0;
  int64_t qkv_width() const { return (N + 2 * K) * H; }
  int64_t kv_width() const { return 2 * K * H; }  // a key/value block's row: K heads, then V heads
  int64_t out_width() const { return N * H; }
  static AttentionHeads of(const Tensor& qkv, int n_heads, int n_kv_heads);
};

// The key and value heads of qkv[B, T, (N + 2K) * H], packed as kv[B, T, 2 * K * H].
Tensor key_values(const Tensor& qkv, const AttentionHeads& heads);
// Adds a key/value gradient gkv[B, T, 2KH] into the key and value columns of gqkv[B, T, C].
void add_key_value_grad(const Tensor& gkv, const AttentionHeads& heads, Tensor& gqkv);

// The forward pass over key blocks: an unnormalised output and, per query row and head, the
// running maximum and sum of exponentials, rescaled as each block arrives.
class OnlineAttention {
 public:
  OnlineAttention(const AttentionHeads& heads, const Tensor& qkv);
  // Attends the queries in q_spans to the keys of kv[B, Tk, 2KH] in kv_spans (a key block
  // whose positions all follow a query span's is skipped for it).
  void attend(const std::vector<PositionSpan>& q_spans, const Tensor& kv, const std::vector<PositionSpan>& kv_spans);
  // y[B, Tq, N * H]; every query row must have seen at least its own position.
  Tensor finish();
  // Per [B, N, Tq]: log of the softmax denominator (valid after finish()).
  const Tensor& log_sum_exp() const { return lse_; }

 private:
  AttentionHeads h_;
  ComputePrecision precision_;
  MatmulOperand q_;  // qkv's queries as the precision multiplies them: converted once
  int64_t Tq_;
  Tensor out_, max_, sum_, lse_;
};

// The backward pass over the same key blocks, given the forward's output y, its log-sum-exp
// and the output's gradient gy: each block() accumulates that block's share into gqkv
// [B, Tq, C] (the query columns) and gkv[B, Tk, 2KH]. qkv and gy are converted to the
// thread's precision once, and rowsum(gy * y) computed once, for all the blocks.
class BlockAttentionBackward {
 public:
  BlockAttentionBackward(const AttentionHeads& heads, const Tensor& qkv, const Tensor& y, const Tensor& lse,
                         const Tensor& gy);
  void block(const std::vector<PositionSpan>& q_spans, const Tensor& kv, const std::vector<PositionSpan>& kv_spans,
             Tensor& gqkv, Tensor& gkv) const;

 private:
  AttentionHeads h_;
  ComputePrecision precision_;
  MatmulOperand q_, gy_;
  int64_t Tq_;
  Tensor lse_, delta_;  // per [B, N, Tq]
};

// Causal attention of qkv[B, T, C] (rows are positions 0..T-1) computed key block by key
// block of `block` positions: ops::causal_attention's result without keeping the [T, T]
// probabilities. Differentiable.
Tensor blockwise_causal_attention(const Tensor& qkv, int n_heads, int n_kv_heads, int64_t block);

}  // namespace shardlab::ops
