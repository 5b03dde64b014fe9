// The language-model head and its loss fused: cross_entropy(x · W^T) without the logits.
//
// ops::cross_entropy(ops::linear(x, w), targets) holds [R, V] fp32 logits from forward to
// backward, cross-entropy's softmax beside them and, in backward, their gradient: at
// B 4, T 1024 (R = 4096 rows) and GPT-2's V = 50257 that is 0.8 GB each. This op keeps
// only O(R) per row -- the log-sum-exp statistics (row maximum and 1 / sum of exponentials):
//
//   forward   row chunks of x: a chunk's logits [c, V] through ops/matmul.h, its target
//             logits and softmax statistics read, the chunk dropped
//   backward  vocabulary chunks of W: logits [R, v] recomputed, softmax - onehot scaled by
//             the upstream gradient / denominator, dx accumulated and dW's rows v written
//
// A chunk's logits take at most `chunk_bytes` (default 64 MiB). The matmuls run in the
// thread's compute precision exactly as ops::linear's do (bf16 operands, fp32
// accumulation), so the loss and gradients equal the unfused ops' to fp32 summation order.
// Backward multiplies twice more than the unfused head (the recomputed logits): the
// price of never holding them.
//
// Under a vocab-parallel layout w holds rows [first, first + V/t) of the vocabulary:
// `shard.combine` merges each row's statistics across the shards (three floats a row,
// once per forward; see merge_row_statistics); backward needs no communication, and
// dx is this shard's partial sum, which the layout's own hook on x reduces.
//
//   Tensor loss = ops::linear_cross_entropy(h, wte.weight, targets);   // h [R, D], wte [V, D]
//   loss.backward();
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "framework/tensor.h"

namespace shardlab::ops {

constexpr int64_t kLinearCrossEntropyChunkBytes = int64_t{64} << 20;

// w's rows as a slice [first, first + w.dim(0)) of a vocabulary of `vocab` entries.
struct VocabShard {
  int64_t first = 0;
  int64_t vocab = 0;  // 0: w is the whole vocabulary
  // Replaces each row's statistics over this shard's columns by the whole vocabulary's:
  // stats[0, R) row maxima m, [R, 2R) sums of exp(z - m), [2R, 3R) target logits (0 where
  // a row's target is in another shard). Every shard must end with the same values.
  std::function<void(std::span<float> stats)> combine;
};

struct LinearCrossEntropyOptions {
  int64_t chunk_bytes = kLinearCrossEntropyChunkBytes;  // a chunk's logits, at most
  VocabShard shard;
};

// loss = sum over rows r with targets[r] != kIgnoreIndex of -log softmax(x[r] · w^T)[targets[r]],
// divided by `denominator` (default: the number of such rows), as ops::cross_entropy.
// x[R, D], w[V, D], targets[R] (global vocabulary indices under a shard).
Tensor linear_cross_entropy(const Tensor& x, const Tensor& w, std::span<const int32_t> targets,
                            double denominator = 0.0, const LinearCrossEntropyOptions& options = {});

// For a VocabShard's combine: `gathered` holds t shards' [3, R] statistics one after another
// (as an all_gather of them lays them out); writes the whole vocabulary's [3, R] to `out`.
// The same arithmetic in the same order on every shard, so every shard gets the same loss.
void merge_row_statistics(std::span<const float> gathered, int64_t shards, std::span<float> out);

// True when [rows, vocab] fp32 logits would not fit in one chunk: where fusing saves memory.
bool linear_cross_entropy_saves_memory(int64_t rows, int64_t vocab,
                                       int64_t chunk_bytes = kLinearCrossEntropyChunkBytes);

}  // namespace shardlab::ops
