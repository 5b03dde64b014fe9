// The vocab-parallel end of tensor parallelism: each rank of the tensor axis holds the
// logits of its vocabulary slice, columns [first, first + V/t), and the full [R, V]
// logits are never formed for training (Megatron-LM's vocab-parallel cross-entropy).
//
//   forward   row maxima: all_gather of R floats, the max taken locally
//             sums of exponentials and target logits: one all_reduce of 2R floats
//   backward  softmax - onehot on the local columns; no communication (the f after the
//             final norm all-reduces the gradient of the hidden states)
//
//   Tensor loss = vocab_parallel_cross_entropy(tp, local_logits, targets, r * V / t);
//
// The fused head (framework/ops/linear_cross_entropy.h) never forms even the local
// [R, V/t] logits for all rows at once: it takes the head's input and this rank's rows of
// its weight, and combines each row's max, sum of exponentials and target logit across the
// tensor axis with one all_gather of 3R floats per forward; backward has no communication
// either (the same f reduces the input's gradient).
//
//   Tensor loss = vocab_parallel_linear_cross_entropy(tp, h, local_weight, targets, r * V / t, V);
#pragma once

#include <cstdint>
#include <span>

#include "framework/ops/linear_cross_entropy.h"
#include "framework/tensor.h"
#include "parallel/comm/mesh.h"

namespace shardlab::parallel {

// ops::cross_entropy of the logits whose columns [first, first + V/t) are `logits`
// [R, V/t] on each rank: the same loss on every rank, targets of -1 ignored, divided by
// `denominator` (default: the number of targets that are not -1).
Tensor vocab_parallel_cross_entropy(const AxisGroup& tensor, const Tensor& logits, std::span<const int32_t> targets,
                                    int64_t first, double denominator = 0.0);

// ops::linear_cross_entropy(x, w_full, targets) where this rank holds rows
// [first, first + V/t) of w_full [V, D] as `weight`; x [R, D] the same on every rank.
// The same loss on every rank; gradients: x's partial (this shard's), the weight's rows.
Tensor vocab_parallel_linear_cross_entropy(const AxisGroup& tensor, const Tensor& x, const Tensor& weight,
                                           std::span<const int32_t> targets, int64_t first, int64_t vocab,
                                           double denominator = 0.0,
                                           int64_t chunk_bytes = ops::kLinearCrossEntropyChunkBytes);

// [R, V/t] on each rank -> [R, V], rank i's columns at [i V/t, (i+1) V/t): for evaluation
// and decoding, which need whole rows. Backward keeps this rank's columns.
Tensor gather_vocab(const AxisGroup& tensor, const Tensor& logits);

}  // namespace shardlab::parallel
