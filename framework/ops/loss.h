// Fused softmax + cross-entropy over the vocabulary.
#pragma once

#include <cstdint>
#include <span>

#include "framework/tensor.h"

namespace shardlab::ops {

constexpr int32_t kIgnoreIndex = -1;

// loss = sum over rows r with targets[r] != kIgnoreIndex of -log softmax(logits[r])[targets[r]],
// divided by `denominator` (default: the number of such rows). logits[R, V], targets[R].
// Pass the global target count as denominator when a batch is split over ranks or
// microbatches, so that the pieces add up to the loss of the whole batch.
Tensor cross_entropy(const Tensor& logits, std::span<const int32_t> targets, double denominator = 0.0);

}  // namespace shardlab::ops
