#include "parallel/cost/inference/serving.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "framework/error.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/training/axis_conditions.h"

namespace shardlab::cost {
namespace {

void require_above_zero(const char* what, double value, const char* hint) {
  if (!(value > 0)) throw UserError(std::string(what) + " " + format_number(value) + " must be positive; " + hint);
}

// ceil() of a server count, forgiving the last bit of rounding (100 x 0.91 s is 91 servers, not 92).
int64_t whole_servers(double servers) { return static_cast<int64_t>(std::ceil(servers * (1 - 1e-12))); }

}  // namespace

SliceMemory slice_memory(const ServedModel& m, DType weights, int chips, int64_t context, const HardwareProfile& hw) {
  require_above_zero("chips", chips, "give the slice's chip count");
  require_above_zero("context", static_cast<double>(context), "give the KV length of a sequence");
  require_above_zero("KV bytes per token", m.kv_bytes_per_token, "give the model's KV cache per token");
  SliceMemory s;
  s.hbm_bytes = chips * hw.hbm_bytes;
  s.weight_bytes = m.params * bytes_of(weights);
  s.weight_chips = s.weight_bytes / hw.hbm_bytes;
  s.weight_slice_chips = slice_chips(s.weight_bytes, hw);
  s.free_bytes = s.hbm_bytes - s.weight_bytes;
  s.kv_bytes_per_sequence = static_cast<double>(context) * m.kv_bytes_per_token;
  s.max_batch = s.free_bytes > 0 ? static_cast<int64_t>(std::floor(s.free_bytes / s.kv_bytes_per_sequence)) : 0;
  return s;
}

DecodeRun decode_run(const ServedModel& m, const InferenceConfig& c, int64_t steps, const HardwareProfile& hw,
                     double step_seconds) {
  require_above_zero("decode tokens", static_cast<double>(steps), "give the tokens generated per sequence");
  if (!(step_seconds >= 0)) throw UserError("a given decode step must be >= 0 seconds (0: priced), got " + format_number(step_seconds));
  DecodeRun r;
  r.step = estimate_decode(m, c, hw);
  if (step_seconds > 0) {
    r.step.step_seconds = step_seconds;
    r.step.tokens_per_second = static_cast<double>(c.batch) / step_seconds;
    r.step.tokens_per_second_per_chip = r.step.tokens_per_second / c.chips;
  }
  r.steps = steps;
  r.seconds = static_cast<double>(steps) * r.step.step_seconds;
  r.tokens = static_cast<double>(c.batch) * static_cast<double>(steps);
  r.queries_per_second = static_cast<double>(c.batch) / r.seconds;
  r.queries_per_second_per_chip = r.queries_per_second / c.chips;
  return r;
}

GenerationSharding generation_sharding(int64_t batch, int64_t d, int64_t f, int y, const ShardingDTypes& t,
                                       const HardwareProfile& hw) {
  require_above_zero("batch", static_cast<double>(batch), "give the sequences decoded together");
  require_above_zero("model-parallel degree", y, "give the chips the weights are sharded over");
  if (d < 1 || f < 1) throw UserError("model sharding needs the model's D and F; give --model or --d-model and --d-ff");
  if (t.axes < 1) throw UserError("--axes " + std::to_string(t.axes) + ": the model axis spans at least 1 torus axis");
  const double b = static_cast<double>(batch), dd = static_cast<double>(d), ff = static_cast<double>(f);
  const double w_ici = allgather_bandwidth(hw, t.axes);
  const double act = bytes_of(t.activations), w = bytes_of(t.weights);
  GenerationSharding g;
  g.ici_seconds = b * dd * act / w_ici;
  g.hbm_seconds = dd * ff * w / (y * hw.hbm_bandwidth);
  g.math_seconds = 2 * b * dd * ff / (y * peak_flops(hw, compute_dtype(t.activations, t.weights)));
  g.beta = hw.hbm_bandwidth / w_ici;
  g.max_y = ff * w / (b * act * g.beta);
  g.compute_bound_max_y = tp_max_degree(f, hw, t.axes, compute_dtype(t.activations, t.weights));
  g.latency_bound_y = b * dd * act / (hw.ici.bandwidth * hw.ici.latency);
  const double worst = std::max({g.ici_seconds, g.hbm_seconds, g.math_seconds});
  g.bound = worst == g.math_seconds ? "compute" : worst == g.hbm_seconds ? "hbm" : "ici";
  return g;
}

WeightStationary2d weight_stationary_2d(int64_t batch, int64_t d, int64_t f, int chips, double x, DType activations,
                                        const HardwareProfile& hw) {
  require_above_zero("batch", static_cast<double>(batch), "give the sequences decoded together");
  require_above_zero("chips", chips, "give the chips the MLP is sharded over");
  if (d < 1 || f < 1) throw UserError("2D weight-stationary needs the model's D and F; give --model or --d-model and --d-ff");
  if (x < 0 || x > chips)
    throw UserError("2D X " + format_number(x) + " must be between 1 and the chips (" + std::to_string(chips) + ")");
  const double b = static_cast<double>(batch), dd = static_cast<double>(d), ff = static_cast<double>(f);
  const double w = allgather_bandwidth(hw, 1), a = bytes_of(activations);
  WeightStationary2d s;
  s.optimal_x = std::sqrt(chips * dd / (2 * ff));
  s.x = x > 0 ? x : s.optimal_x;
  s.yz = chips / s.x;
  s.comms_2d_seconds = b * dd * a / (s.x * w) + 2 * b * ff * a / (s.yz * w);
  s.comms_1d_seconds = 2 * b * dd * a / (3 * w);
  s.math_seconds = 4 * b * dd * ff / (chips * peak_flops(hw, activations));
  s.crossover_chips = 18 * ff / dd;
  return s;
}

Eviction eviction(int64_t batch, int64_t prompt, int64_t generated, double kv_bytes_per_token) {
  require_above_zero("decode tokens", static_cast<double>(generated), "give the tokens generated per sequence");
  if (prompt < 0) throw UserError("prompt tokens " + std::to_string(prompt) + " must be >= 0");
  Eviction e;
  e.sequences_per_step = static_cast<double>(batch) / static_cast<double>(generated);
  e.tokens_per_step = e.sequences_per_step * static_cast<double>(prompt + generated);
  e.bytes_per_step = e.tokens_per_step * kv_bytes_per_token;
  return e;
}

Disaggregation disaggregation(double prefill_seconds, double step_seconds, int64_t batch, int64_t generated,
                              double queries_per_second) {
  require_above_zero("prefill seconds", prefill_seconds, "price the prefill first");
  require_above_zero("decode step seconds", step_seconds, "price the decode step first");
  require_above_zero("decode tokens", static_cast<double>(generated), "give the tokens generated per sequence");
  if (queries_per_second < 0) throw UserError("--qps " + format_number(queries_per_second) + " must be >= 0 queries/s");
  Disaggregation s;
  s.prefill_server_qps = 1 / prefill_seconds;
  s.decode_server_qps = static_cast<double>(batch) / (step_seconds * static_cast<double>(generated));
  s.prefill_per_decode = s.decode_server_qps / s.prefill_server_qps;
  s.interleaved_qps = 1 / (prefill_seconds + 1 / s.decode_server_qps);
  if (queries_per_second > 0) {
    s.prefill_servers = whole_servers(queries_per_second * prefill_seconds);
    s.decode_servers = whole_servers(queries_per_second / s.decode_server_qps);
  }
  return s;
}

PrefixCache prefix_cache(int64_t prompt, int64_t cached, double cache_bytes, double kv_bytes_per_token) {
  require_above_zero("prompt tokens", static_cast<double>(prompt), "give the prompt length");
  if (cached < 0 || cached >= prompt)
    throw UserError("cached prefix " + std::to_string(cached) + " tokens must be at least 0 and below the prompt's " +
                    std::to_string(prompt) + " (its last token is always prefilled)");
  PrefixCache p;
  p.prefill_fraction = static_cast<double>(prompt - cached) / static_cast<double>(prompt);
  const double per_prompt = static_cast<double>(prompt) * kv_bytes_per_token;
  p.prompts_held = per_prompt > 0 && cache_bytes > 0 ? static_cast<int64_t>(std::floor(cache_bytes / per_prompt)) : 0;
  return p;
}

DecodeActivations decode_activations(const TransformerShape& s, int64_t batch, DType activations) {
  if (batch < 1) throw UserError("decode batch must be at least 1 sequence, got " + std::to_string(batch));
  const double b = static_cast<double>(batch) * bytes_of(activations);
  const double d = static_cast<double>(s.d_model), h = static_cast<double>(s.head_dim);
  DecodeActivations a;
  a.attention_bytes = b * (2 * d + static_cast<double>(s.heads + 2 * s.kv_heads) * h + static_cast<double>(s.heads) * h);
  const double experts_per_token = s.experts > 0 ? static_cast<double>(s.top_k) : 1.0;
  a.mlp_bytes = b * (2 * d + experts_per_token * (s.gated_mlp ? 3.0 : 2.0) * static_cast<double>(s.d_ff));
  a.head_bytes = b * (d + static_cast<double>(s.vocab));
  a.peak_bytes = std::max({a.attention_bytes, a.mlp_bytes, a.head_bytes});
  a.scores_bytes = b * static_cast<double>(s.heads) * static_cast<double>(s.context);
  a.unfused_peak_bytes = std::max(a.peak_bytes, a.attention_bytes + a.scores_bytes);
  return a;
}

LatencyLimitedServing best_serving_under_latency(const ServedModel& m, const InferenceConfig& config,
                                                 double max_step_seconds, int max_chips, const HardwareProfile& hw) {
  if (!(max_step_seconds > 0))
    throw UserError("the step latency limit must be positive seconds, got " + format_number(max_step_seconds));
  const int smallest = slice_chips(m.params * bytes_of(config.weights), hw);
  if (max_chips < smallest)
    throw UserError("--max-chips " + std::to_string(max_chips) + " is below the " + std::to_string(smallest) +
                    "-chip slice the weights need; give --max-chips " + std::to_string(smallest) + " or more");
  LatencyLimitedServing out;
  double best_rate = 0;
  for (int chips = smallest; chips <= max_chips; chips *= 2) {
    LatencyLimitedSlice s;
    s.chips = chips;
    s.max_batch = slice_memory(m, config.weights, chips, config.context, hw).max_batch;
    InferenceConfig c = config;
    c.chips = chips;
    auto step = [&](int64_t batch) {
      c.batch = batch;
      return estimate_decode(m, c, hw);
    };
    // The largest batch in [1, max_batch] whose step meets the limit (steps grow with B).
    int64_t lo = 0, hi = s.max_batch;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (step(mid).step_seconds <= max_step_seconds) lo = mid;
      else hi = mid - 1;
    }
    s.batch = lo;
    s.step = step(lo > 0 ? lo : 1);
    // Ties (within 0.1%) go to the smaller slice: the same rate on fewer chips.
    if (s.batch > 0 && s.step.tokens_per_second_per_chip > best_rate * 1.001) {
      best_rate = s.step.tokens_per_second_per_chip;
      out.best = static_cast<int>(out.slices.size());
    }
    out.slices.push_back(s);
    if (chips > max_chips / 2) break;  // no overflow past max_chips
  }
  return out;
}

}  // namespace shardlab::cost
