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

// What a sample() call measured: the prefill of the prompt (one forward over its tokens,
// giving the first new token) and the decode steps (one token each, through the cache).
struct SampleTiming {
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;
  int64_t decode_steps = 0;
  double decode_seconds = 0;
};

// Returns only the new tokens. The prompt is cut to its last (context - max_new) tokens.
std::vector<int> sample(const nn::Transformer& model, const std::vector<int>& prompt, const SampleOptions& options,
                        SampleTiming* timing = nullptr);

}  // namespace shardlab::cli
