// Autoregressive sampling with a KV cache: a batch of prompts is left-padded to one length
// and prefilled once, then each step decodes one token of every row through the cache.
//
//   SampleTiming t;
//   auto outs = runtime::sample(model, {prompt_a, prompt_b}, {.max_new = 32}, &t);
#pragma once

#include <cstdint>
#include <vector>

#include "framework/nn/transformer.h"

namespace shardlab::runtime {

struct SampleOptions {
  int max_new = 64;
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: the whole vocabulary
  uint64_t seed = 0;
  int stop_token = -1;       // a row stops after emitting it (e.g. '\n'); -1: never
  // When the cache fills, keep each row's last context/2 tokens and prefill them again
  // (the output may then run past the context window). Off: a request that would pass the
  // context is cut to fit (the prompt loses its oldest tokens), as the caller checked.
  bool sliding_window = false;
};

// What a sample() call measured: the prefill of the prompts (one forward over the padded
// batch, giving each row's first new token), the decode steps (one token for every row,
// through the cache) and the window slides (re-prefills of the kept tokens).
struct SampleTiming {
  int64_t batch = 1;
  int64_t prompt_tokens = 0;  // per row, padded length
  double prefill_seconds = 0;
  int64_t decode_steps = 0;   // each decodes `batch` tokens
  double decode_seconds = 0;
  int64_t slides = 0;
  double slide_seconds = 0;
};

// Returns each row's new tokens (up to and including its stop token). Draws of row b at
// step i use counter i * batch + b, so one prompt samples as it did alone.
std::vector<std::vector<int>> sample(const nn::Transformer& model, const std::vector<std::vector<int>>& prompts,
                                     const SampleOptions& options, SampleTiming* timing = nullptr);

}  // namespace shardlab::runtime
