#include "parallel/cost/inference/serving_search.h"

#include "framework/error.h"
#include "parallel/cost/inference/serving.h"

namespace shardlab::cost {

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
