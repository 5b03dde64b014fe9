#include "parallel/runtime/sampling.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "framework/error.h"
#include "framework/rng.h"

namespace shardlab::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Fills `cache` (emptied first) with each row's last `keep` tokens, left-padded to the
// longest, and returns the logits of every row's last position [B, V] (row-major).
std::vector<float> prefill(const nn::Transformer& model, const std::vector<std::vector<int>>& rows, int64_t keep,
                           nn::KVCache& cache) {
  const auto B = static_cast<int64_t>(rows.size());
  int64_t T = 0;
  for (const auto& r : rows) T = std::max(T, std::min<int64_t>(keep, static_cast<int64_t>(r.size())));
  std::vector<int32_t> ids(B * T, 0);
  for (int64_t b = 0; b < B; ++b) {
    const auto& r = rows[b];
    const int64_t n = std::min<int64_t>(keep, static_cast<int64_t>(r.size()));
    cache.pad[b] = T - n;
    std::copy(r.end() - n, r.end(), ids.begin() + b * T + (T - n));
  }
  cache.length = 0;
  const Tensor logits = model.decode(ids, B, T, cache);
  const int64_t V = model.config.vocab;
  std::vector<float> last(B * V);
  for (int64_t b = 0; b < B; ++b) std::copy_n(logits.data() + ((b + 1) * T - 1) * V, V, last.begin() + b * V);
  return last;
}

}  // namespace

int pick_token(std::span<const float> logits, const SampleOptions& o, uint64_t draw) {
  const auto V = static_cast<int64_t>(logits.size());
  if (o.temperature <= 0.0f) return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<std::pair<float, int>> scored(V);
  for (int64_t v = 0; v < V; ++v) scored[v] = {logits[v] / o.temperature, static_cast<int>(v)};
  int64_t keep = o.top_k > 0 ? std::min<int64_t>(o.top_k, V) : V;
  std::partial_sort(scored.begin(), scored.begin() + keep, scored.end(), std::greater<>());
  std::vector<double> weight(keep);  // unnormalised probabilities, most likely first
  double z = 0.0;
  for (int64_t i = 0; i < keep; ++i) z += weight[i] = std::exp(scored[i].first - scored[0].first);
  if (o.top_p < 1.0f) {
    double mass = 0.0;
    int64_t nucleus = 0;
    while (nucleus < keep && mass < o.top_p * z) mass += weight[nucleus++];
    keep = std::max<int64_t>(nucleus, 1);
    z = mass > 0.0 ? mass : weight[0];
  }
  double u = Rng(o.seed).uniform(hash_name("sample"), draw) * z;
  for (int64_t i = 0; i < keep; ++i) {
    u -= weight[i];
    if (u <= 0.0) return scored[i].second;
  }
  return scored[keep - 1].second;
}

std::vector<std::vector<int>> sample(const nn::Transformer& model, const std::vector<std::vector<int>>& prompts,
                                     const SampleOptions& o, SampleTiming* timing) {
  SL_ASSERT(!prompts.empty(), "sample() needs at least one prompt");
  const auto B = static_cast<int64_t>(prompts.size());
  const int64_t V = model.config.vocab, context = model.config.context;
  const int64_t drawn = o.vocab_limit > 0 ? std::min(o.vocab_limit, V) : V;  // ids a row may draw
  // Without a sliding window every row must fit prompt + max_new in the context.
  const int64_t room = o.sliding_window ? context - 1 : std::max<int64_t>(context - o.max_new, 1);
  nn::KVCache cache(model.config, B, model.blocks.front()->attn.n_kv_heads);  // this rank's kv heads
  std::vector<std::vector<int>> history = prompts, out(B);
  std::vector<bool> done(B, false);
  SampleTiming t{.batch = B};

  auto start = Clock::now();
  std::vector<float> last = prefill(model, history, room, cache);
  t.prefill_seconds = seconds_since(start);
  t.prompt_tokens = cache.length;
  std::vector<int32_t> step_ids(B);
  for (int i = 0; i < o.max_new; ++i) {
    for (int64_t b = 0; b < B; ++b) {
      const int next = pick_token(std::span<const float>(last.data() + b * V, drawn), o, static_cast<uint64_t>(i) * B + b);
      step_ids[b] = next;
      if (done[b]) continue;
      out[b].push_back(next);
      history[b].push_back(next);
      done[b] = std::find(o.stop_tokens.begin(), o.stop_tokens.end(), next) != o.stop_tokens.end() ||
                (o.stop_when && o.stop_when(out[b]));
    }
    if (i + 1 == o.max_new || std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    if (cache.length >= context) {
      if (!o.sliding_window) break;  // the caller checked that this cannot happen
      start = Clock::now();
      last = prefill(model, history, context / 2, cache);  // the last half-window, again
      t.slide_seconds += seconds_since(start);
      ++t.slides;
      continue;
    }
    start = Clock::now();
    const Tensor logits = model.decode(step_ids, B, 1, cache);
    t.decode_seconds += seconds_since(start);
    ++t.decode_steps;
    last.assign(logits.data(), logits.data() + B * V);
  }
  if (timing) *timing = t;
  return out;
}

}  // namespace shardlab::runtime
