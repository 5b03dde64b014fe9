#include "parallel/cost/training/run_totals.h"

#include <cmath>
#include <utility>

#include "framework/error.h"
#include "parallel/cost/model/transformer.h"

namespace shardlab::cost {
namespace {

const std::pair<const char*, StateBytes> kStatePresets[] = {
    {"bf16-adam", {2, 0, 8}},
    {"mixed-adam", {2, 2, 12}},
    {"fp32-adam", {4, 4, 8}},
    {"bf16-sgd", {2, 2, 0}},
};

}  // namespace

StateBytes state_preset(const std::string& name) {
  for (const auto& [preset, bytes] : kStatePresets)
    if (name == preset) return bytes;
  std::string names;
  for (const std::string& n : state_preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw UserError("unknown training state '" + name + "'; use one of " + names +
                  " or give --param-bytes, --grad-bytes, --optimizer-bytes");
}

std::vector<std::string> state_preset_names() {
  std::vector<std::string> names;
  for (const auto& [preset, bytes] : kStatePresets) names.emplace_back(preset);
  return names;
}

RunTotals run_totals(const RunSpec& run, const HardwareProfile& hw) {
  if (!(run.params > 0)) throw UserError("the parameter count must be positive, got " + std::to_string(run.params));
  if (!(run.tokens > 0)) throw UserError("the token count must be positive, got " + std::to_string(run.tokens));
  if (run.chips < 1) throw UserError("the chip count must be >= 1, got " + std::to_string(run.chips));
  if (!(run.mfu > 0 && run.mfu <= 1))
    throw UserError("MFU " + std::to_string(run.mfu) + " is a fraction of peak FLOP/s; give a value in (0, 1]");
  if (!(run.flops_multiplier >= 1))
    throw UserError("the FLOPs multiplier (remat's recompute) must be >= 1, got " + std::to_string(run.flops_multiplier));
  if (!(run.state.per_param() > 0)) throw UserError("training state must take some bytes per parameter");
  RunTotals t;
  t.flops_per_token = (train_flops(run.params, 1) + run.extra_flops_per_token) * run.flops_multiplier;
  t.train_flops = t.flops_per_token * run.tokens;
  t.chip_flops_per_second = peak_flops(hw, run.dtype);
  t.cluster_flops_per_second = t.chip_flops_per_second * static_cast<double>(run.chips);
  t.cluster_hbm_bytes = hw.hbm_bytes * static_cast<double>(run.chips);
  t.seconds = t.train_flops / (t.cluster_flops_per_second * run.mfu);
  t.days = t.seconds / kSecondsPerDay;
  t.chip_hours = t.seconds * static_cast<double>(run.chips) / kSecondsPerHour;
  t.state_bytes = run.params * run.state.per_param();
  t.total_bytes = t.state_bytes + run.activation_bytes;
  t.bytes_per_chip = t.total_bytes / static_cast<double>(run.chips);
  t.min_chips = static_cast<int64_t>(std::ceil(t.total_bytes / hw.hbm_bytes));
  t.fits = t.bytes_per_chip <= hw.hbm_bytes;
  t.largest_pure_dp_params = largest_pure_dp_params(hw, run.state);
  return t;
}

double achieved_mfu(double train_flops, double chip_hours, double peak_flops_per_chip) {
  if (!(train_flops > 0 && chip_hours > 0 && peak_flops_per_chip > 0))
    throw UserError("an achieved MFU needs positive training FLOPs, chip-hours and peak FLOP/s; got " +
                    std::to_string(train_flops) + ", " + std::to_string(chip_hours) + ", " +
                    std::to_string(peak_flops_per_chip));
  return train_flops / (chip_hours * kSecondsPerHour * peak_flops_per_chip);
}

double largest_pure_dp_params(const HardwareProfile& hw, const StateBytes& state) {
  return hw.hbm_bytes / state.per_param();
}

double checkpoint_bytes(double tokens, int64_t layers, int64_t d_model, double per_layer, DType dtype) {
  return activation_bytes(tokens, layers, per_layer * static_cast<double>(d_model), dtype);
}

}  // namespace shardlab::cost
