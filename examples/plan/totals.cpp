#include "examples/plan/totals.h"

#include <optional>
#include <string>

#include "examples/plan/args.h"
#include "framework/error.h"
#include "framework/nn/config.h"
#include "parallel/cost/network/multipod.h"
#include "parallel/cost/training/run_totals.h"

namespace shardlab::plan {

using namespace shardlab::cost;

void add_totals_flags(cxxopts::Options& o) {
  add_model_flags(o);
  o.add_options("run")("params", "P of 6PT, e.g. 70e9 (default: the model's matmul parameters)",
                       cxxopts::value<std::string>())
      ("tokens", "T: training tokens, e.g. 15e12", cxxopts::value<std::string>())
      ("attention", "add attention's FLOPs at --context (needs a model's shape)")
      ("chips", "chips in the cluster, e.g. 8960", cxxopts::value<std::string>()->default_value("1"))
      ("pods", "whole TPU pods of the profile joined by DCN (chips = pods x pod size), as train --pods",
       cxxopts::value<int>())
      ("mfu", "achieved fraction of peak FLOP/s (what train/infer call --efficiency)",
       cxxopts::value<double>()->default_value("0.4"))
      ("chip-hours", "chip-hours (GPU-hours) a finished run took, e.g. 2.79e6: the MFU it achieved and its days "
                     "on --chips", cxxopts::value<std::string>())
      ("dtype", "the matmul dtype whose peak counts: bf16, fp32, fp8, int8",
       cxxopts::value<std::string>()->default_value("bf16"));
  std::string presets;
  for (const std::string& n : state_preset_names()) presets += (presets.empty() ? "" : "|") + n;
  o.add_options("memory")("state", "training state per parameter: " + presets + " (bf16-adam: the book's 10 B)",
                          cxxopts::value<std::string>()->default_value("bf16-adam"))
      ("param-bytes", "bytes per parameter for the weights (replaces the --state figure)", cxxopts::value<double>())
      ("grad-bytes", "bytes per parameter for gradients", cxxopts::value<double>())
      ("optimizer-bytes", "bytes per parameter for optimizer state (Adam fp32: 8)", cxxopts::value<double>())
      ("batch-tokens", "tokens in one batch, for gradient checkpoints (e.g. 4e6)", cxxopts::value<std::string>())
      ("checkpoints", "[batch, D] bf16 checkpoints kept per layer (the book's k of k*D)",
       cxxopts::value<double>()->default_value("0"))
      ("remat", "none|full|save-matmul|save-mlp-matmul: the policy's recomputed FLOPs (full: 8/6) and, with "
                "--batch-tokens, k from what it keeps (needs a model)",
       cxxopts::value<std::string>());
}

namespace {

// The model's shape when one is named or given by dimensions (--heads marks a full shape).
std::optional<TransformerShape> shape_from(const cxxopts::ParseResult& a) {
  if (a["model"].as<std::string>().empty() && !a.count("heads")) return std::nullopt;
  return model_from(a);
}

StateBytes state_from(const cxxopts::ParseResult& a) {
  StateBytes s = state_preset(a["state"].as<std::string>());
  for (const auto& [flag, field] : {std::pair{"param-bytes", &s.params}, {"grad-bytes", &s.grads},
                                    {"optimizer-bytes", &s.optimizer}}) {
    if (!a.count(flag)) continue;
    *field = a[flag].as<double>();
    if (!(*field >= 0)) throw UserError(std::string("--") + flag + " must be >= 0 bytes per parameter");
  }
  return s;
}

// Gradient checkpoints: k arrays of [batch tokens, D] in bf16 per layer, k from
// --checkpoints or from a --remat policy's saved activations (k = saved per token / D).
struct Checkpoints {
  double per_layer = 0;  // k
  double bytes = 0;
  std::string remat;     // the policy k came from, or empty
};

Checkpoints checkpoints_from(const cxxopts::ParseResult& a, const std::optional<TransformerShape>& shape) {
  Checkpoints c;
  c.per_layer = a["checkpoints"].as<double>();
  if (!(c.per_layer >= 0)) throw UserError("--checkpoints must be >= 0 arrays per layer");
  if (a.count("remat")) {
    if (c.per_layer > 0) throw UserError("give --checkpoints k or --remat POLICY, not both (the policy sets k)");
    if (!shape) throw UserError("--remat needs the model's shape to count what the policy keeps: give --model");
    const nn::Remat remat = nn::parse_remat(a["remat"].as<std::string>());
    c.remat = nn::remat_name(remat);
    c.per_layer = saved_activations_per_token_layer(*shape, remat) / static_cast<double>(shape->d_model);
  }
  if (c.per_layer == 0) return c;
  if (!a.count("batch-tokens")) {
    if (!c.remat.empty()) return c;  // a policy without a batch: its FLOPs, no checkpoint bytes
    throw UserError("--checkpoints needs --batch-tokens, the tokens of one batch (e.g. 4e6)");
  }
  const double tokens = parse_size(a["batch-tokens"].as<std::string>(), "batch-tokens");
  const int64_t layers = shape ? shape->layers : a.count("layers") ? a["layers"].as<int64_t>() : 0;
  const int64_t d = shape ? shape->d_model : a.count("d-model") ? a["d-model"].as<int64_t>() : 0;
  if (layers <= 0 || d <= 0)
    throw UserError("--checkpoints needs the model's layers and width: give --model or --layers and --d-model");
  c.bytes = checkpoint_bytes(tokens, layers, d, c.per_layer, DType::kBf16);
  return c;
}

}  // namespace

int cmd_totals(const cxxopts::ParseResult& a) {
  const HardwareProfile hw = hardware_from(a);
  const std::optional<TransformerShape> shape = shape_from(a);
  if (!a.count("tokens")) throw UserError("--tokens is required: the training tokens, e.g. 15e12");
  if (!a.count("params") && !shape)
    throw UserError("give --params (e.g. 70e9) or --model <preset> (shardlab-plan model --list)");
  RunSpec run;
  run.params = a.count("params") ? parse_size(a["params"].as<std::string>(), "params") : count_params(*shape).matmul;
  run.tokens = parse_size(a["tokens"].as<std::string>(), "tokens");
  if (a.count("attention")) {
    if (!shape) throw UserError("--attention needs the model's heads and layers: give --model or its dimensions");
    run.extra_flops_per_token = 3 * attention_flops_per_token(*shape, shape->context);
  }
  if (a.count("remat")) {  // recomputed forward FLOPs: the policy's training FLOPs over none's
    const nn::Remat remat = nn::parse_remat(a["remat"].as<std::string>());
    run.flops_multiplier = train_flops_per_token(*shape, remat) / train_flops_per_token(*shape, nn::Remat::None);
  }
  run.chips = chips_or_pods(a, hw, parse_count(a["chips"].as<std::string>(), "chips"));
  run.mfu = a["mfu"].as<double>();
  if (!(run.mfu > 0 && run.mfu <= 1))
    throw UserError("--mfu " + std::to_string(run.mfu) + " is a fraction of peak FLOP/s; give a value in (0, 1]");
  run.dtype = parse_dtype(a["dtype"].as<std::string>());
  run.state = state_from(a);
  const Checkpoints checkpoints = checkpoints_from(a, shape);
  run.activation_bytes = checkpoints.bytes;
  const RunTotals t = run_totals(run, hw);
  // --chip-hours: what a finished run achieved (transformers.md Q7), and its days on --chips.
  const double chip_hours = a.count("chip-hours") ? parse_size(a["chip-hours"].as<std::string>(), "chip-hours") : 0;
  const double mfu_achieved = a.count("chip-hours") ? achieved_mfu(t.train_flops, chip_hours, t.chip_flops_per_second) : 0;

  Json json{{"hw", hw.name}};
  if (shape) json["model"] = shape->describe();
  json.update(Json{{"params", run.params},
                   {"tokens", run.tokens},
                   {"attention_flops_per_token", run.extra_flops_per_token},
                   {"flops_per_token", t.flops_per_token},
                   {"train_flops", t.train_flops},
                   {"chips", run.chips},
                   {"dtype", to_string(run.dtype)},
                   {"chip_flops_per_second", t.chip_flops_per_second},
                   {"cluster_flops_per_second", t.cluster_flops_per_second},
                   {"cluster_hbm_bytes", t.cluster_hbm_bytes},
                   {"mfu", run.mfu},
                   {"seconds", t.seconds},
                   {"days", t.days},
                   {"chip_hours", t.chip_hours},
                   {"remat_flops_multiplier", run.flops_multiplier},
                   {"achieved", a.count("chip-hours")
                                    ? Json{{"chip_hours", chip_hours}, {"mfu", mfu_achieved},
                                           {"days", chip_hours / static_cast<double>(run.chips) / 24}}
                                    : Json(nullptr)},
                   {"state_bytes_per_param", Json{{"params", run.state.params}, {"grads", run.state.grads},
                                                  {"optimizer", run.state.optimizer},
                                                  {"total", run.state.per_param()}}},
                   {"state_bytes", t.state_bytes},
                   {"checkpoints_per_layer_d", checkpoints.per_layer},
                   {"remat", checkpoints.remat},
                   {"activation_bytes", run.activation_bytes},
                   {"total_bytes", t.total_bytes},
                   {"bytes_per_chip", t.bytes_per_chip},
                   {"hbm_bytes_per_chip", hw.hbm_bytes},
                   {"fits", t.fits},
                   {"min_chips", t.min_chips},
                   {"largest_pure_dp_params", t.largest_pure_dp_params}});
  // Past one pod, what train --pods prints of the DCN between them (parallel/cost/network/multipod.h).
  const int pods = pods_spanned(static_cast<int>(run.chips), hw);
  const double batch = a.count("batch-tokens") ? parse_size(a["batch-tokens"].as<std::string>(), "batch-tokens") : 0;
  json.update(Json{{"pods", pods}, {"tokens_per_pod", pods > 1 && batch > 0 ? Json(batch / pods) : Json(nullptr)},
                   {"dcn_critical_tokens_per_pod",
                    pods > 1 ? Json(dcn_critical_batch_per_pod(hw, run.dtype)) : Json(nullptr)}});

  const std::string chips = std::to_string(run.chips) + " x " + hw.name;
  std::string text = (shape ? shape->describe() + "\n" : "") + "run: " + scientific(run.params, "params") + " x " +
                     scientific(run.tokens, "tokens") + "\n  training " + scientific(t.train_flops, "FLOP") + " = " +
                     scientific(t.flops_per_token, "FLOP/token") + " x tokens (6P" +
                     (run.extra_flops_per_token > 0 ? " + attention " + scientific(run.extra_flops_per_token, "FLOP") +
                                                          " at T=" + std::to_string(shape->context)
                                                    : std::string()) +
                     (run.flops_multiplier > 1 ? ", all x " + human(run.flops_multiplier, "") + " for remat " + checkpoints.remat +
                                                     "'s recomputed forward"
                                               : std::string()) +
                     ")\n  cluster " + chips + ": " + human(t.cluster_flops_per_second, "FLOP/s") + " peak " +
                     to_string(run.dtype) + ", " + human(t.cluster_hbm_bytes, "B") + " HBM\n  time at " +
                     human(100 * run.mfu, "") + "% MFU: " + scientific(t.seconds, "s") + " = " +
                     human(t.days, "days") + " = " + scientific(t.chip_hours, "chip-hours") +
                     (a.count("chip-hours") ? "\n  achieved in " + scientific(chip_hours, "chip-hours") + ": MFU " +
                                                  human(100 * mfu_achieved, "") + "% (training FLOPs / (chip-hours x 3600 s x " +
                                                  human(t.chip_flops_per_second, "FLOP/s") + ")), " +
                                                  human(chip_hours / static_cast<double>(run.chips) / 24, "days") + " on " +
                                                  std::to_string(run.chips) + " chips"
                                            : std::string()) +
                     "\n  state " + human(run.state.per_param(), "B") + "/param (params " +
                     human(run.state.params, "") + ", grads " + human(run.state.grads, "") + ", optimizer " +
                     human(run.state.optimizer, "") + ") = " + human(t.state_bytes, "B");
  if (run.activation_bytes > 0) {
    text += ", + checkpoints " + human(run.activation_bytes, "B") + " (" + human(checkpoints.per_layer, "") + " x D per layer" +
            (checkpoints.remat.empty() ? "" : ", remat " + checkpoints.remat) + ") = " + human(t.total_bytes, "B");
  }
  text += "\n  per chip (fully sharded over " + std::to_string(run.chips) + "): " + human(t.bytes_per_chip, "B") +
          " of " + human(hw.hbm_bytes, "B") + (t.fits ? "" : " DOES NOT FIT") + "; needs >= " +
          std::to_string(t.min_chips) + " chips\n  largest model pure data parallelism trains on one " + hw.name +
          ": " + human(t.largest_pure_dp_params, "") + " params" + " (HBM / " + human(run.state.per_param(), "B") +
          " per param, no activations)\n";
  if (pods > 1) text += "  " + pods_line(hw, pods, batch, run.dtype) + "\n";
  emit(a, json, text);
  return 0;
}

}  // namespace shardlab::plan
