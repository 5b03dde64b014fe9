// Autoregressive sampling with a KV cache: a batch of prompts is left-padded to one length
// and prefilled once, then each step decodes one token of every row through the cache.
//
//   SampleTiming t;
//   auto outs = runtime::sample(model, {prompt_a, prompt_b}, {.max_new = 32}, &t);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "framework/nn/transformer.h"

namespace shardlab::runtime {

struct SampleOptions {
  int max_new = 64;
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: the whole vocabulary
  // Nucleus sampling: among the most likely tokens (after top_k) the fewest whose
  // probabilities sum to at least top_p. 1: all of them.
  float top_p = 1.0f;
  uint64_t seed = 0;
  // Draw only ids below this (a tokenizer's ids, under a model vocabulary padded past them).
  // 0: every id of the model.
  int64_t vocab_limit = 0;
  std::vector<int> stop_tokens = {};  // a row stops after emitting one of them (e.g. '\n')
  // A row also stops once this returns true for its new tokens so far (e.g. when their text
  // holds a stop string). Empty: never.
  std::function<bool(const std::vector<int>& new_tokens)> stop_when = {};
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

// The token drawn from one row's logits [V] (greedy when temperature is 0): temperature,
// then top_k, then top_p; draw number `draw` of the seed's stream.
int pick_token(std::span<const float> logits, const SampleOptions& options, uint64_t draw);

// Returns each row's new tokens (up to and including the token that stopped it). Draws of row b at
// step i use counter i * batch + b, so one prompt samples as it did alone.
std::vector<std::vector<int>> sample(const nn::Transformer& model, const std::vector<std::vector<int>>& prompts,
                                     const SampleOptions& options, SampleTiming* timing = nullptr);

}  // namespace shardlab::runtime
