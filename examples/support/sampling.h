// Autoregressive sampling with a KV cache: the prompt is prefilled once, then each new
// token costs one position's work.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/nn/transformer.h"

namespace shardlab::cli {

struct SampleOptions {
  int max_new = 64;
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: the whole vocabulary
  uint64_t seed = 0;
  int stop_token = -1;       // stop after emitting it (e.g. '\n'); -1: never
};

// Returns only the new tokens. The prompt is cut to its last (context - max_new) tokens.
std::vector<int> sample(const nn::Transformer& model, const std::vector<int>& prompt, const SampleOptions& options);

}  // namespace shardlab::cli
