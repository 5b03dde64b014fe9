#include "parallel/cost/training/axis_conditions.h"

#include <algorithm>
#include <cmath>

#include "framework/error.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/training/context_attention.h"

namespace shardlab::cost {

double wire_critical_factor(const WireDtypes& wire, bool sharded) {
  const double book = wire_bytes_per_value(DType::kBf16);  // the book's C / W holds for bf16 wires
  const double reduce = wire_bytes_per_value(wire.reduce) / book, gather = wire_bytes_per_value(wire.gather) / book;
  return sharded ? std::max(gather, (gather + reduce) / 2) : reduce;
}

double dp_critical_batch(const HardwareProfile& hw, int axes, bool across_nodes, DType compute, DType wire) {
  return wire_critical_factor({.reduce = wire}, false) * peak_flops(hw, compute) /
         allgather_bandwidth(hw, axes, across_nodes);
}

double moe_critical_batch(double dense_critical_batch, int64_t experts, int64_t top_k) {
  return experts > 0 ? dense_critical_batch * static_cast<double>(experts) / static_cast<double>(top_k)
                     : dense_critical_batch;
}

double tp_max_degree(int64_t d_ff, const HardwareProfile& hw, int axes, DType compute) {
  return axes * static_cast<double>(d_ff) * allgather_bandwidth(hw, 1) / peak_flops(hw, compute);
}

int tp_degree(double max_degree, int node_size) {
  int degree = 1;
  while (2.0 * degree < max_degree) degree *= 2;
  // A degree between one and two nodes would straddle a node boundary: one node's worth.
  if (degree > node_size && degree < 2 * node_size) degree = node_size;
  return degree;
}

double fsdp_tp_critical_batch(int64_t d_ff, const HardwareProfile& hw, double fsdp_axes, double tensor_axes,
                              DType compute) {
  const double alpha = dp_critical_batch(hw, 1, false, compute);
  return alpha * alpha / (fsdp_axes * tensor_axes * static_cast<double>(d_ff));
}

double ring_attention_critical_tokens(const HardwareProfile& hw, double heads, double kv_heads,
                                      double bytes_per_element, double visible, DType compute) {
  if (heads <= 0 || kv_heads <= 0 || visible <= 0 || hw.ici.bandwidth <= 0)
    throw UserError("ring attention needs positive heads, kv heads, visible fraction and link bandwidth");
  // One position of one head dim: the step's FLOPs and bytes both scale with Tk and H.
  return peak_flops(hw, compute) * ring_block_bytes(1, 1, kv_heads, 1, bytes_per_element) /
         (hw.ici.bandwidth * ring_block_flops(1, 1, 1, heads, 1, visible));
}

FsdpTpSplit optimal_fsdp_tp_split(double batch_tokens, int64_t d_ff, int chips, double fsdp_axes,
                                  double tensor_axes) {
  if (chips < 1 || batch_tokens <= 0 || d_ff <= 0)
    throw UserError("FSDP/TP split needs positive chips, batch and F");
  FsdpTpSplit s;
  s.x_opt = std::sqrt(batch_tokens * chips * fsdp_axes / (static_cast<double>(d_ff) * tensor_axes));
  const int max_log = static_cast<int>(std::floor(std::log2(chips)));
  const int x_log = std::clamp(static_cast<int>(std::lround(std::log2(std::max(s.x_opt, 1.0)))), 0, max_log);
  s.fsdp = 1 << x_log;
  s.tensor = 1 << static_cast<int>(std::floor(std::log2(static_cast<double>(chips) / s.fsdp)));
  // Exactly `chips`: every power-of-two tensor that divides them, fsdp the rest.
  double best = INFINITY;
  for (int tensor = 1; chips % tensor == 0; tensor *= 2) {
    const int fsdp = chips / tensor;
    const double distance = std::abs(std::log2(fsdp / std::max(s.x_opt, 1.0)));
    if (distance < best) best = distance, s.whole_fsdp = fsdp, s.whole_tensor = tensor;
  }
  return s;
}

BatchScale batch_scale(double critical_per_chip, double batch_tokens, int64_t chips) {
  if (!(critical_per_chip > 0))
    throw UserError("a per-chip batch bound must be positive, got " + std::to_string(critical_per_chip));
  return {.critical_per_chip = critical_per_chip,
          .max_chips = batch_tokens / critical_per_chip,
          .min_batch_tokens = static_cast<double>(chips) * critical_per_chip};
}

}  // namespace shardlab::cost
