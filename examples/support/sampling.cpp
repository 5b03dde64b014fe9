#include "examples/support/sampling.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "framework/rng.h"

namespace shardlab::cli {
namespace {

int pick(const float* logits, int64_t V, const SampleOptions& o, uint64_t draw) {
  if (o.temperature <= 0.0f) return static_cast<int>(std::max_element(logits, logits + V) - logits);
  std::vector<std::pair<float, int>> scored(V);
  for (int64_t v = 0; v < V; ++v) scored[v] = {logits[v] / o.temperature, static_cast<int>(v)};
  int64_t keep = o.top_k > 0 ? std::min<int64_t>(o.top_k, V) : V;
  std::partial_sort(scored.begin(), scored.begin() + keep, scored.end(), std::greater<>());
  double z = 0.0;
  for (int64_t i = 0; i < keep; ++i) z += std::exp(scored[i].first - scored[0].first);
  double u = Rng(o.seed).uniform(hash_name("sample"), draw) * z;
  for (int64_t i = 0; i < keep; ++i) {
    u -= std::exp(scored[i].first - scored[0].first);
    if (u <= 0.0) return scored[i].second;
  }
  return scored[keep - 1].second;
}

}  // namespace

std::vector<int> sample(const nn::Transformer& model, const std::vector<int>& prompt, const SampleOptions& o,
                        SampleTiming* timing) {
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const int64_t V = model.config.vocab, room = model.config.context - o.max_new;
  std::vector<int32_t> ids(prompt.end() - std::min<int64_t>(static_cast<int64_t>(prompt.size()), std::max<int64_t>(room, 1)),
                           prompt.end());
  nn::KVCache cache(model.config, 1, model.blocks.front()->attn.n_kv_heads);  // this rank's kv heads
  std::vector<int> out;
  SampleTiming t{.prompt_tokens = static_cast<int64_t>(ids.size())};
  auto start = Clock::now();
  Tensor logits = model.decode(ids, 1, static_cast<int64_t>(ids.size()), cache);
  t.prefill_seconds = seconds_since(start);
  const float* last = logits.data() + (static_cast<int64_t>(ids.size()) - 1) * V;
  for (int i = 0; i < o.max_new; ++i) {
    int next = pick(last, V, o, static_cast<uint64_t>(i));
    out.push_back(next);
    if (next == o.stop_token || cache.length >= model.config.context || i + 1 == o.max_new) break;
    int32_t token = next;
    start = Clock::now();
    logits = model.decode(std::span<const int32_t>(&token, 1), 1, 1, cache);
    t.decode_seconds += seconds_since(start);
    ++t.decode_steps;
    last = logits.data();
  }
  if (timing) *timing = t;
  return out;
}

}  // namespace shardlab::cli
