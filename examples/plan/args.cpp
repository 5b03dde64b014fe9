#include "examples/plan/args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "framework/error.h"
#include "parallel/cost/network/multipod.h"
#include "parallel/cost/training/axis_conditions.h"

namespace shardlab::plan {

using namespace shardlab::cost;

namespace {

Json link_json(const LinkSpec& l) { return Json{{"bandwidth", l.bandwidth}, {"latency", l.latency}}; }

}  // namespace

std::string coordinates(const std::vector<int>& c) {
  std::string out = "(";
  for (size_t i = 0; i < c.size(); ++i) out.append(i ? "," : "").append(std::to_string(c[i]));
  return out.append(")");
}

std::vector<int> parse_list(const std::string& text, char separator, const std::string& flag) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t stop = std::min(text.find(separator, start), text.size());
    const std::string item = text.substr(start, stop - start);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0)
      throw UserError("--" + flag + " '" + text + "' must be non-negative integers separated by '" + separator + "'");
    out.push_back(static_cast<int>(v));
    start = stop + 1;
  }
  return out;
}

std::string human(double value, const char* unit) {
  if (!std::isfinite(value)) return std::string(value > 0 ? "inf" : value < 0 ? "-inf" : "nan") + (*unit ? " " : "") + unit;
  const char* prefixes[] = {"p", "n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
  char rounded[32];  // to the 3 digits printed first, so 0.99988 is "1", not "1e+03 m"
  std::snprintf(rounded, sizeof rounded, "%.3g", value);
  value = std::strtod(rounded, nullptr);
  int index = 4;
  while (value != 0 && std::fabs(value) < 1 && index > 0) value *= 1000, --index;
  while (std::fabs(value) >= 1000 && index < 10) value /= 1000, ++index;
  char text[64];
  std::snprintf(text, sizeof text, "%.3g %s%s", value, prefixes[index], unit);
  std::string out = text;
  if (out.back() == ' ') out.pop_back();
  return out;
}

std::string scientific(double value, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3g %s", value, unit);
  return text;
}

void add_hardware_flags(cxxopts::Options& o) {
  o.add_options("hardware (any figure of the --hw profile, replaced)")
      ("flops", "peak bf16 FLOP/s per chip, e.g. 1.97e14", cxxopts::value<std::string>())
      ("flops-fp32", "peak fp32 FLOP/s per chip", cxxopts::value<std::string>())
      ("flops-int8", "peak int8 OP/s per chip", cxxopts::value<std::string>())
      ("flops-fp8", "peak fp8 FLOP/s per chip (dense, without structured sparsity)", cxxopts::value<std::string>())
      ("hbm", "memory per chip, bytes (16G = 16 GiB)", cxxopts::value<std::string>())
      ("hbm-bw", "memory bandwidth per chip, bytes/s, e.g. 8.2e11", cxxopts::value<std::string>())
      ("ici-bw", "one link's bandwidth one way, bytes/s (the book's W_ici unidirectional)", cxxopts::value<std::string>())
      ("ici-bw-bidir", "one link's bandwidth both ways together, bytes/s (halved for one way)",
       cxxopts::value<std::string>())
      ("latency", "seconds per hop on the fast links", cxxopts::value<double>())
      ("dcn-bw", "bandwidth per chip beyond the fast domain, bytes/s", cxxopts::value<std::string>())
      ("clock", "the vector units' clock, Hz (GPU: the boost clock), e.g. 1.75e9: their FLOP/s are ALUs x clock",
       cxxopts::value<std::string>());
}

HardwareProfile hardware_from(const cxxopts::ParseResult& a, const std::string& name, int threads) {
  HardwareProfile p = hardware(name.empty() ? a["hw"].as<std::string>() : name);
  if (threads > 0) use_threads(p, threads);
  std::string changed;
  const auto set = [&](const char* flag, double* field, double scale = 1.0) {
    if (!a.count(flag)) return;
    *field = parse_size(a[flag].as<std::string>(), flag) * scale;
    if (!(*field > 0)) throw UserError(std::string("--") + flag + " must be positive");
    changed += std::string(changed.empty() ? "" : ", ") + "--" + flag;
  };
  set("flops", &p.flops_bf16);
  set("flops-fp32", &p.flops_fp32);
  set("flops-int8", &p.flops_int8);
  set("flops-fp8", &p.flops_fp8);
  set("hbm", &p.hbm_bytes);
  set("hbm-bw", &p.hbm_bandwidth);
  if (a.count("ici-bw") && a.count("ici-bw-bidir")) throw UserError("give --ici-bw (one way) or --ici-bw-bidir, not both");
  set("ici-bw", &p.ici.bandwidth);
  set("ici-bw-bidir", &p.ici.bandwidth, 0.5);
  set("dcn-bw", &p.dcn.bandwidth);
  set("clock", &p.facts.clock_hz);
  if (a.count("latency")) {
    p.ici.latency = a["latency"].as<double>();
    if (!(p.ici.latency >= 0)) throw UserError("--latency must be >= 0 seconds");
    changed += std::string(changed.empty() ? "" : ", ") + "--latency";
  }
  if (!changed.empty()) p.description += " (overridden: " + changed + ")";
  if (threads > 0 && (a.count("flops") || a.count("flops-fp32")))  // the user's figures: ranks of `threads` threads
    p.fingerprint = fingerprint_machine(p.fingerprint) + " | " + std::to_string(threads) + " threads";
  return p;
}

void emit(const cxxopts::ParseResult& args, const Json& json, const std::string& text) {
  std::cout << (args["json"].as<bool>() ? json.dump(2) + "\n" : text);
}

Json profile_json(const HardwareProfile& p) {
  Json links = Json::object();
  for (const auto& [axis, link] : p.axis_links) links[axis] = link_json(link);
  return Json{{"name", p.name}, {"description", p.description}, {"flops_bf16", p.flops_bf16},
              {"flops_fp32", p.flops_fp32}, {"flops_int8", p.flops_int8}, {"flops_fp8", p.flops_fp8},
              {"hbm_bytes", p.hbm_bytes}, {"hbm_bandwidth", p.hbm_bandwidth},
              {"interconnect", p.interconnect == Interconnect::kTorus ? "torus" : "switched"},
              {"ici", link_json(p.ici)}, {"dcn", link_json(p.dcn)}, {"torus_axes", p.torus_axes},
              {"wraparound", p.wraparound}, {"wraparound_granule", p.wraparound_granule}, {"node_size", p.node_size},
              {"calibrated", p.calibrated}, {"axis_links", links}};
}

Json memory_json(const TrainingMemory& m) {
  return Json{{"params", m.params}, {"grads", m.grads}, {"optimizer", m.optimizer}, {"activations", m.activations},
              {"total", m.total()}};
}

Json roofline_json(const Roofline& r) {
  return Json{{"flops", r.flops}, {"bytes", r.bytes}, {"intensity", r.intensity},
              {"critical_intensity", r.critical_intensity}, {"t_math", r.t_math}, {"t_comms", r.t_comms},
              {"lower_bound", r.lower_bound}, {"upper_bound", r.upper_bound}, {"compute_bound", r.compute_bound},
              {"achieved_flops_per_second", r.achieved_flops}};
}

std::string explain(const Roofline& r, const char* bandwidth_name) {
  std::string s = r.compute_bound ? "compute-bound" : std::string(bandwidth_name) + "-bound";
  s += ": intensity " + human(r.intensity, "FLOP/B") + (r.compute_bound ? " >= " : " < ") + "critical " +
       human(r.critical_intensity, "FLOP/B") + " (T_math " + human(r.t_math, "s") + ", T_comms " +
       human(r.t_comms, "s") + "); time between " + human(r.lower_bound, "s") + " and " + human(r.upper_bound, "s") + "\n";
  return s;
}

void add_model_flags(cxxopts::Options& o) {
  o.add_options("model")("model", "preset (shardlab-plan model --list)", cxxopts::value<std::string>()->default_value(""))
      ("layers", "L", cxxopts::value<int64_t>())("d-model", "D", cxxopts::value<int64_t>())
      ("d-ff", "F (per expert)", cxxopts::value<int64_t>())("heads", "N", cxxopts::value<int64_t>())
      ("kv-heads", "K", cxxopts::value<int64_t>())("head-dim", "H (default D/N)", cxxopts::value<int64_t>())
      ("vocab", "V", cxxopts::value<int64_t>())("context", "T (suffixes ok)", cxxopts::value<std::string>())
      ("experts", "E (0 = dense)", cxxopts::value<int64_t>())("top-k", "experts per token", cxxopts::value<int64_t>())
      ("moe-every", "every n-th layer has experts (the rest a dense MLP)", cxxopts::value<int64_t>())
      ("gelu", "plain GELU MLP (2 matrices) instead of SwiGLU")("tied", "tie input and output embeddings");
}

std::optional<std::string> batch_text(const cxxopts::ParseResult& a, const std::string& unit) {
  const std::string explicit_flag = "batch-" + unit;
  if (a.count("batch") && a.count(explicit_flag))
    throw UserError("give --batch or --" + explicit_flag + ", not both (both are the batch in " +
                    (unit == "seqs" ? "sequences" : unit) + ")");
  if (a.count(explicit_flag)) return a[explicit_flag].as<std::string>();
  if (a.count("batch")) return a["batch"].as<std::string>();
  return std::nullopt;
}

double train_batch_tokens(const cxxopts::ParseResult& a, const cost::TransformerShape& model) {
  const std::optional<std::string> tokens = batch_text(a, "tokens");
  if (tokens && a.count("batch-seqs"))
    throw UserError("give the batch in tokens (--batch, --batch-tokens) or in sequences (--batch-seqs), not both");
  if (tokens) return parse_size(*tokens, "batch");
  if (!a.count("batch-seqs"))
    throw UserError("--batch is required for train (tokens per step, e.g. 4M; or --batch-tokens, or --batch-seqs "
                    "sequences of --context tokens)");
  const int64_t sequences = parse_count(a["batch-seqs"].as<std::string>(), "batch-seqs");
  if (sequences < 1) throw UserError("--batch-seqs must be at least 1 sequence");
  return static_cast<double>(sequences) * static_cast<double>(model.context);
}

double efficiency_from(const cxxopts::ParseResult& a) {
  const double e = a["efficiency"].as<double>();
  if (!(e > 0 && e <= 1)) {
    throw UserError("--efficiency " + std::to_string(e) + " is the fraction of peak FLOP/s achieved; give a value in (0, 1]");
  }
  return e;
}

TransformerShape model_from(const cxxopts::ParseResult& a) {
  const std::string preset = a["model"].as<std::string>();
  TransformerShape s = preset.empty() ? TransformerShape{} : model_preset(preset);
  if (preset.empty()) s.name = "custom";
  auto take = [&](const char* flag, int64_t& field) {
    if (a.count(flag)) field = a[flag].as<int64_t>();
  };
  // --params P with --d-model D: the dimensions not given take their defaults, L follows.
  const bool by_params = a.count("params") && preset.empty() && !a.count("layers");
  if (by_params) {
    const std::string p = "--params " + a["params"].as<std::string>();
    if (!a.count("d-model"))
      throw UserError(p + " gives no shape: add --d-model D (e.g. 8192) and --context T; the layer count follows, "
                      "--d-ff defaults to 4D, --heads to D/128, --vocab to 32000");
    if (!a.count("context")) throw UserError(p + " needs the sequence length: add --context T, e.g. 8192");
    s.d_model = a["d-model"].as<int64_t>();
    s.layers = 1, s.d_ff = 4 * s.d_model, s.vocab = 32000;
    if (!a.count("heads") && !a.count("head-dim") && s.d_model % 128 != 0)
      throw UserError(p + ": --d-model " + std::to_string(s.d_model) +
                      " is not a multiple of the default head dim 128; give --heads N");
    s.heads = s.d_model / 128;
  }
  take("layers", s.layers), take("d-model", s.d_model), take("d-ff", s.d_ff), take("heads", s.heads);
  take("kv-heads", s.kv_heads), take("vocab", s.vocab), take("experts", s.experts), take("top-k", s.top_k);
  take("moe-every", s.moe_every);
  if (!a.count("kv-heads") && preset.empty()) s.kv_heads = s.heads;
  if (a.count("head-dim")) {
    s.head_dim = a["head-dim"].as<int64_t>();
  } else if (preset.empty() || a.count("d-model") || a.count("heads")) {
    if (s.heads > 0 && s.d_model % s.heads != 0) {
      throw UserError("--d-model " + std::to_string(s.d_model) + " is not divisible by --heads " +
                      std::to_string(s.heads) + "; choose heads that divide the width, or give --head-dim");
    }
    s.head_dim = s.heads > 0 ? s.d_model / s.heads : 0;
  }
  if (a.count("context")) s.context = parse_count(a["context"].as<std::string>(), "context");
  if (a.count("gelu")) s.gated_mlp = false;
  if (a.count("tied")) s.tied_embeddings = true;
  if (preset.empty() && s.layers == 0)
    throw UserError("give --model <preset> or the dimensions --layers --d-model --d-ff --heads --vocab --context");
  if (by_params) {
    const double params = parse_size(a["params"].as<std::string>(), "params");
    s = shape_for_params(params, s);
    s.name = human(params, "") + " params";
  }
  s.validate();
  return s;
}

int chips_or_pods(const cxxopts::ParseResult& a, const cost::HardwareProfile& hw, int64_t chips) {
  if (!a.count("pods")) return static_cast<int>(chips);
  const int pods = a["pods"].as<int>();
  require_positive("--pods", pods);
  if (hw.interconnect == cost::Interconnect::kSwitched)
    throw UserError("--pods " + std::to_string(pods) + ": " + hw.name +
                    " is a GPU cluster of nodes, not TPU pods; give --chips (the fat tree prices its nodes)");
  const int64_t pod_chips = static_cast<int64_t>(pods) * hw.node_size;
  if (pod_chips > (1 << 30))
    throw UserError("--pods " + std::to_string(pods) + " of " + std::to_string(hw.node_size) + " chips is " +
                    std::to_string(pod_chips) + " chips, past what the planner counts; give fewer pods");
  if (a.count("chips") && chips != pod_chips)
    throw UserError("--chips " + std::to_string(chips) + " disagrees with --pods " + std::to_string(pods) + " x " +
                    std::to_string(hw.node_size) + " chips per pod of " + hw.name + " = " +
                    std::to_string(pod_chips) + "; give one of them");
  return static_cast<int>(pod_chips);
}

std::string pods_line(const cost::HardwareProfile& hw, int pods, double batch_tokens, cost::DType compute) {
  return std::to_string(pods) + " pods of " + std::to_string(hw.node_size) + " chips joined by DCN (" +
         human(hw.dcn.bandwidth, "B/s") + " per chip): " +
         (batch_tokens > 0 ? human(batch_tokens / pods, "") + " tokens per pod; " : std::string()) +
         "pure DP across pods hides under the backward pass above C/W_dcn = " +
         human(cost::dcn_critical_batch_per_pod(hw, compute), "") + " per pod";
}

std::string wire_scaling(const cost::WireDtypes& wire, bool sharded) {
  const double factor = cost::wire_critical_factor(wire, sharded);
  if (factor == 1) return "";
  char text[32];
  std::snprintf(text, sizeof text, " x %.3g (wires)", factor);
  return text;
}

}  // namespace shardlab::plan
