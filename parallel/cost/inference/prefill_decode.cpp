#include "parallel/cost/inference/prefill_decode.h"

#include <algorithm>
#include <cmath>

#include "framework/error.h"

namespace shardlab::cost {
namespace {

void check(const InferenceConfig& c) {
  if (c.batch < 1 || c.chips < 1 || c.context < 1)
    throw UserError("inference needs batch, context and chips >= 1, got batch=" + std::to_string(c.batch) +
                    " context=" + std::to_string(c.context) + " chips=" + std::to_string(c.chips));
}

}  // namespace

ServedModel served_model(const TransformerShape& shape, DType kv) {
  const ParamCounts p = count_params(shape);
  return {p.total, p.matmul, kv_bytes_per_token(shape, kv), attention_flops_per_token(shape, 1)};
}

DecodeEstimate estimate_decode(const ServedModel& m, const InferenceConfig& c, const HardwareProfile& hw) {
  check(c);
  const double n = c.chips, b = static_cast<double>(c.batch), t = static_cast<double>(c.context);
  const double bandwidth = n * hw.hbm_bandwidth;
  const double peak = n * peak_flops(hw, compute_dtype(c.weights, c.activations));
  DecodeEstimate d;
  d.weight_bytes = m.params * bytes_of(c.weights);
  d.kv_bytes = b * t * m.kv_bytes_per_token;
  d.memory_per_chip = (d.weight_bytes + d.kv_bytes) / n;
  const double t_weights = d.weight_bytes / bandwidth, t_matmul = 2 * b * m.matmul_params / peak;
  const double t_kv = d.kv_bytes / bandwidth, t_scores = b * t * m.attention_flops_per_token_context / peak;
  d.params_seconds = std::max(t_weights, t_matmul);
  d.attention_seconds = std::max(t_kv, t_scores);
  d.step_seconds = d.params_seconds + d.attention_seconds;
  d.tokens_per_second = b / d.step_seconds;
  d.tokens_per_second_per_chip = d.tokens_per_second / n;
  d.memory_bound = t_weights >= t_matmul && t_kv >= t_scores;
  d.critical_batch = peak / bandwidth * bytes_of(c.weights) / 2;
  d.fits = d.memory_per_chip <= hw.hbm_bytes;
  d.min_chips = static_cast<int>(std::ceil((d.weight_bytes + d.kv_bytes) / hw.hbm_bytes));
  return d;
}

PrefillEstimate estimate_prefill(const ServedModel& m, const InferenceConfig& c, const HardwareProfile& hw) {
  check(c);
  const double t = static_cast<double>(c.context), b = static_cast<double>(c.batch);
  PrefillEstimate e;
  e.matmul_flops = 2 * m.matmul_params * t;
  e.flops = e.matmul_flops + t * t * m.attention_flops_per_token_context;
  const double compute = b * e.flops / (c.chips * peak_flops(hw, compute_dtype(c.weights, c.activations)) * c.efficiency);
  const double memory = (m.params * bytes_of(c.weights) + b * t * m.kv_bytes_per_token) / (c.chips * hw.hbm_bandwidth);
  e.seconds = std::max(compute, memory);
  e.compute_bound = compute >= memory;
  e.tokens_per_second = b * t / e.seconds;
  return e;
}

int slice_chips(double bytes, const HardwareProfile& hw) {
  const double chips = std::ceil(bytes / hw.hbm_bytes);
  return 1 << static_cast<int>(std::ceil(std::log2(std::max(chips, 1.0))));
}

}  // namespace shardlab::cost
