// shardlab-plan: the book's roofline arithmetic from the command line.
//
//   shardlab-plan hw [--hw tpu-v5p]                       list profiles / show one
//   shardlab-plan matmul --hw tpu-v5e --batch 512 --d-model 8192 --d-ff 32768 --w-dtype int8
//   shardlab-plan matmul --hw tpu-v5e --batch 4096 --cases 4     the four sharded-matmul cases
//   shardlab-plan matmul --hw tpu-v5p --gather-or-reduce 4        gather W[D_X, F] or reduce the output
//   shardlab-plan matmul --hw tpu-v5e --w-dtype int8 --batch 1024 --sweep 1024:4096,8192:32768   roofline table
//   shardlab-plan roofline --einsum bd,df->bf --dims b=4096,d=8192,f=32768 --dtype bf16
//   shardlab-plan collective --hw tpu-v4p --mesh 4x4x4 --op allgather --bytes 8M --axes 0,1
//   shardlab-plan collective --hw tpu-v5e --mesh 4x4 --op send --from 0,0 --to 3,3 --bytes 16M
//   shardlab-plan offload --hw tpu-v5e --mesh 4x4 --rows 128K --cols 128K --dtype int8 --batch 8
//   shardlab-plan network --hw h100 --gpus 256 --inner 16 --op all_gather --bytes 537e6
//   shardlab-plan array --shape 128,2048 --spec XY, --mesh X=2,Y=8,Z=2 --dtype int8 [--hw h100]
//   shardlab-plan model --model llama3-70b [--batch 4M --remat full]
//   shardlab-plan model --params 70e9 [--batch 4M]        a bare parameter count: 6N, bytes
//   shardlab-plan model --model llama3-70b --per-layer    each matmul's parameters and FLOPs
//   shardlab-plan train --model llama2-13b --hw tpu-v5p --chips 64 --batch 4M
//   shardlab-plan train --model gpt-bench --cluster local --chips 2 --batch 2048 --run --train-args "--steps 20"
//   shardlab-plan infer --model llama3-70b --hw tpu-v5e --chips 8 --batch 32 --context 8k --weights int8
//   shardlab-plan serve --model llama3-70b --hw tpu-v5e --chips 16 --decode-tokens 512 --qps 100
//   shardlab-plan serve --model mixtral-8x7b --hw tpu-v5e --chips 16 --batch 32 --expert-shards 8 --kv-shard batch=2
//   shardlab-plan totals --params 70e9 --tokens 15e12 --hw tpu-v5p --chips 8960 --mfu 0.4
//   shardlab-plan calibrate [--threads 1] [--axis-link tensor=2e9:1e-6] [--out FILE]
//
// Every subcommand takes --json (one object; keys in docs/plan_json.md). Sizes take
// binary suffixes: 16k = 16384, 4M = 4194304 (also G, T), or plain/scientific numbers.
#include <cxxopts.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <utility>
#include <vector>

#include "examples/plan/args.h"
#include "examples/plan/array.h"
#include "examples/plan/collective.h"
#include "examples/plan/hw.h"
#include "examples/plan/layer_table.h"
#include "examples/plan/matmul_cases.h"
#include "examples/plan/matmul_sweep.h"
#include "examples/plan/model_size.h"
#include "examples/plan/network.h"
#include "examples/plan/offload.h"
#include "examples/plan/roofline.h"
#include "examples/plan/serve.h"
#include "examples/plan/totals.h"
#include "examples/plan/train.h"
#include "framework/error.h"
#include "parallel/cost/hardware/calibrate.h"
#include "parallel/cost/inference/prefill_decode.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/run_totals.h"

using namespace shardlab;
using namespace shardlab::cost;
using namespace shardlab::plan;

namespace {

int cmd_matmul(const cxxopts::ParseResult& a) {
  const HardwareProfile hw = hardware_from(a);
  MatmulSpec m;
  m.b = parse_count(a["batch"].as<std::string>(), "batch");
  m.d = parse_count(a["d-model"].as<std::string>(), "d-model");
  m.f = parse_count(a["d-ff"].as<std::string>(), "d-ff");
  m.x = parse_dtype(a["x-dtype"].as<std::string>());
  m.w = parse_dtype(a["w-dtype"].as<std::string>());
  m.out = parse_dtype(a["out-dtype"].as<std::string>());
  const int shards = a["shards"].as<int>();
  Json json = Json{{"hw", hw.name}, {"b", m.b}, {"d", m.d}, {"f", m.f},
                   {"compute_dtype", to_string(compute_dtype(m.x, m.w))}};
  std::string text;
  if (a.count("tile")) {
    const std::string tile_text = a["tile"].as<std::string>();
    const int64_t tile = tile_text == "mxu" ? hw.facts.mxu_size : parse_count(tile_text, "tile");
    if (tile < 1) throw UserError("--tile mxu: " + hw.name + " has no MXU size; give --tile 128 or 256");
    const PaddedMatmul p = pad_to_tile(m, tile);
    text = "D and F padded to the " + std::to_string(tile) + " tile: D " + std::to_string(m.d) + " -> " +
           std::to_string(p.padded.d) + ", F " + std::to_string(m.f) + " -> " + std::to_string(p.padded.f) + "; " +
           human(100 * p.useful_fraction, "") + "% of the FLOPs are useful (W gains " +
           human(p.padded_elements, "") + " padded elements, " + human(2.0 * m.b * p.padded_elements, "FLOP") +
           " wasted)\n";
    json.update(Json{{"tile", tile}, {"padded_d", p.padded.d}, {"padded_f", p.padded.f},
                     {"useful_fraction", p.useful_fraction}, {"padded_elements", p.padded_elements}});
    m = p.padded;
  }
  if (a.count("sweep")) {
    text += matmul_sweep(a["sweep"].as<std::string>(), m, hw, json);
  } else if (a.count("cases") || a.count("gather-or-reduce")) {
    const bool cases = a.count("cases") > 0;
    const int n = a[cases ? "cases" : "gather-or-reduce"].as<int>();
    if (shards > 1 || (cases && a.count("gather-or-reduce")))
      throw UserError("give one of --cases, --gather-or-reduce and --shards (each shards D over one axis)");
    const std::string operand = a["sharded"].as<std::string>();
    if (operand != "w" && operand != "x") throw UserError("--sharded '" + operand + "': give w (Question 4) or x (Question 9)");
    text += cases ? matmul_cases_text(n, m, hw, json)
                  : gather_or_reduce_text(n, operand == "w" ? ShardedOperand::kWeight : ShardedOperand::kActivation, m,
                                          hw, json);
  } else if (shards > 1) {
    const ShardedMatmul s = contraction_sharded_matmul(m, shards, hw);
    json.update(Json{{"shards", shards}, {"roofline", roofline_json(s.roofline)}, {"critical_d", s.critical_d}});
    text += "D sharded over " + std::to_string(shards) + " chips, partial sums all-reduced over ICI\n" +
            explain(s.roofline, "network") + "compute-bound iff D > " + human(s.critical_d, "") + "\n";
  } else {
    const Roofline r = matmul_roofline(m, hw);
    const double critical_b = matmul_critical_batch(m, hw), approx = matmul_critical_batch_approx(m, hw);
    json.update(Json{{"roofline", roofline_json(r)}, {"critical_batch", critical_b}, {"critical_batch_approx", approx}});
    text += explain(r, "memory") +
            (std::isinf(critical_b) ? "no batch makes it compute-bound" : "compute-bound iff B > " + human(critical_b, "")) +
            " (B << D, F: " + human(approx, "") + ")\n";
  }
  emit(a, json, text);
  return 0;
}

Json params_json(const ParamCounts& p) {
  return Json{{"attention", p.attention}, {"mlp", p.mlp}, {"router", p.router}, {"norms", p.norms},
              {"embedding", p.embedding}, {"unembedding", p.unembedding}, {"positions", p.positions},
              {"total", p.total}, {"active", p.active}, {"matmul", p.matmul}};
}

// `model --params N`: what a bare parameter count gives without the shape (book
// transformers.md / training.md): 6N training and 2N forward FLOPs per token (attention
// left out), weight bytes in bf16 and int8, the bf16 + fp32 Adam state (10 B/param), and
// with --batch the FLOPs of a step. Activations and the KV cache need the shape.
int model_from_params(const cxxopts::ParseResult& a) {
  if (!a["model"].as<std::string>().empty() || a.count("layers"))
    throw UserError("give --params " + a["params"].as<std::string>() +
                    " alone, or the shape (--model or --layers ...) without --params: the shape counts its own");
  const double n = parse_size(a["params"].as<std::string>(), "params");
  if (!(n > 0)) throw UserError("--params must be > 0, got " + a["params"].as<std::string>());
  const double state = state_preset("bf16-adam").per_param();
  Json json{{"params", n},
            {"train_flops_per_token", train_flops(n, 1)},
            {"forward_flops_per_token", 2 * n},
            {"weight_bytes_bf16", 2 * n},
            {"weight_bytes_int8", n},
            {"training_state_bytes_per_param", state},
            {"training_state_bytes", state * n}};
  std::string text = human(n, "") + " params (no shape: attention FLOPs, activations and KV cache need --model)\n" +
                     "  training " + human(train_flops(n, 1), "FLOP") + "/token (6N), forward " + human(2 * n, "FLOP") +
                     "/token (2N)\n  weights " + human(2 * n, "B") + " in bf16, " + human(n, "B") +
                     " in int8; training state " + human(state * n, "B") + " (" + human(state, "B") +
                     "/param: bf16 params, fp32 Adam)\n";
  if (const auto batch = batch_text(a, "tokens")) {
    const double tokens = parse_size(*batch, "batch");
    json.update(Json{{"batch_tokens", tokens}, {"train_flops_per_step", train_flops(n, tokens)}});
    text += "  a step of " + human(tokens, "tokens") + ": " + scientific(train_flops(n, tokens), "FLOP") + "\n";
  }
  emit(a, json, text);
  return 0;
}

int cmd_model(const cxxopts::ParseResult& a) {
  if (a.count("list")) {
    Json names = Json::array();
    std::string text;
    for (const auto& n : model_preset_names()) names.push_back(n), text += n + "\n";
    emit(a, Json{{"presets", names}}, text);
    return 0;
  }
  if (a.count("params")) return model_from_params(a);
  const TransformerShape s = model_from(a);
  if (a.count("per-layer")) return print_layer_table(a, s);
  const ParamCounts p = count_params(s);
  const nn::Remat remat = nn::parse_remat(a["remat"].as<std::string>());
  const DType kv = parse_dtype(a["kv-dtype"].as<std::string>());
  Json json = Json{{"model", s.describe()}, {"params", params_json(p)},
                   {"train_flops_per_token", train_flops_per_token(s, remat)},
                   {"forward_flops_per_token", forward_flops_per_token(s, s.context)},
                   {"attention_crossover_context", attention_crossover_context(s)},
                   {"attention_matmul_crossover_context", attention_matmul_crossover_context(s)},
                   {"kv_bytes_per_token", kv_bytes_per_token(s, kv)}, {"remat", nn::remat_name(remat)},
                   {"saved_activations_per_token_layer", saved_activations_per_token_layer(s, remat)}};
  std::string text = s.describe() + "\n  params " + human(p.total, "") + " (attention " + human(p.attention, "") +
                     ", mlp " + human(p.mlp, "") + ", embeddings " + human(p.embedding + p.unembedding, "") +
                     ", active " + human(p.active, "") + ")\n  training " +
                     human(train_flops_per_token(s, remat), "FLOP") + "/token (6N = " + human(train_flops(p.matmul, 1), "FLOP") +
                     " + attention at T=" + std::to_string(s.context) + "; attention matches the projections at T=" +
                     human(attention_crossover_context(s), "") + ", all the layer's matmuls at T=" +
                     human(attention_matmul_crossover_context(s), "") + ")\n  KV cache " +
                     human(kv_bytes_per_token(s, kv), "B") + "/token in " + to_string(kv) + "\n";
  if (const auto batch = batch_text(a, "tokens")) {
    const double tokens = parse_size(*batch, "batch");
    const TrainingMemory m = training_memory(s, tokens, remat, {});
    json.update(Json{{"batch_tokens", tokens}, {"training_memory", memory_json(m)}});
    text += "  training memory for " + human(tokens, "tokens") + " (bf16, Adam fp32, remat " + nn::remat_name(remat) +
            "): params " + human(m.params, "B") + ", grads " + human(m.grads, "B") + ", optimizer " +
            human(m.optimizer, "B") + ", activations " + human(m.activations, "B") + "\n";
  }
  emit(a, json, text);
  return 0;
}

int cmd_infer(const cxxopts::ParseResult& a) {
  const HardwareProfile hw = hardware_from(a);
  InferenceConfig c;
  c.weights = parse_dtype(a["weights"].as<std::string>());
  const ServedSizes s = served_from(a, c.weights);
  c.batch = parse_count(*batch_text(a, "seqs"), "batch");
  c.context = s.context;
  c.chips = a["chips"].as<int>();
  c.efficiency = efficiency_from(a);
  const ServedModel& m = s.model;
  const DecodeEstimate d = estimate_decode(m, c, hw);
  const PrefillEstimate p = estimate_prefill(m, c, hw);
  const Json decode{{"step_seconds", d.step_seconds},
                    {"tokens_per_second", d.tokens_per_second},
                    {"tokens_per_second_per_chip", d.tokens_per_second_per_chip},
                    {"params_seconds", d.params_seconds},
                    {"attention_seconds", d.attention_seconds},
                    {"weight_bytes", d.weight_bytes},
                    {"kv_bytes", d.kv_bytes},
                    {"memory_per_chip", d.memory_per_chip},
                    {"memory_bound", d.memory_bound},
                    {"critical_batch", d.critical_batch},
                    {"fits", d.fits},
                    {"min_chips", d.min_chips}};
  const Json prefill{{"seconds", p.seconds},
                     {"flops", p.flops},
                     {"matmul_flops", p.matmul_flops},
                     {"tokens_per_second", p.tokens_per_second},
                     {"compute_bound", p.compute_bound}};
  const Json json{{"hw", hw.name},      {"model", s.description}, {"batch", c.batch},
                  {"context", c.context}, {"chips", c.chips},       {"decode", decode},
                  {"prefill", prefill},
                  {"tp_max_degree", s.f > 0 ? Json(tp_max_degree(s.f, hw, 1)) : Json(nullptr)}};
  std::string text = s.description + "\ndecode, batch " + std::to_string(c.batch) + " at context " +
                     std::to_string(c.context) + " on " + std::to_string(c.chips) + " x " + hw.name + ": " +
                     human(d.step_seconds, "s") + " per step, " + human(d.tokens_per_second, "tokens/s") + " (" +
                     human(d.tokens_per_second_per_chip, "tokens/s") + " per chip)\n  " +
                     (d.memory_bound ? "memory-bound" : "partly compute-bound") + ": weights " +
                     human(d.params_seconds, "s") + " + attention over the KV cache " + human(d.attention_seconds, "s") +
                     "; weights turn compute-bound above batch " + human(d.critical_batch, "") + "\n  memory " +
                     human(d.memory_per_chip, "B") + " per chip (weights " + human(d.weight_bytes, "B") + ", KV " +
                     human(d.kv_bytes, "B") + ")" + (d.fits ? "" : " DOES NOT FIT") + "; needs >= " +
                     std::to_string(d.min_chips) + " chips\nprefill of " + std::to_string(c.context) + " tokens x " +
                     std::to_string(c.batch) + ": " + human(p.seconds, "s") + " (" +
                     (p.compute_bound ? "compute-bound" : "memory-bound") + ")\n";
  emit(a, json, text);
  return 0;
}

int cmd_calibrate(const cxxopts::ParseResult& a) {
  CalibrationOptions o;
  o.gemm_size = a["gemm-size"].as<int64_t>();
  o.seconds_per_measure = a["seconds"].as<double>();
  if (!(o.seconds_per_measure > 0)) {
    throw UserError("--seconds " + std::to_string(o.seconds_per_measure) + " must be positive: the time per measurement");
  }
  o.link_latency = a["link-latency"].as<double>();
  const auto specs = a.count("axis-link") ? a["axis-link"].as<std::vector<std::string>>() : std::vector<std::string>{};
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('='), colon = spec.find(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq)
      throw UserError("--axis-link '" + spec + "' must look like tensor=2e9:1e-6 (bytes/s:seconds)");
    o.axis_links[spec.substr(0, eq)] = {parse_size(spec.substr(eq + 1, colon - eq - 1), "axis-link"),
                                        std::strtod(spec.c_str() + colon + 1, nullptr)};
  }
  const int threads = a["threads"].as<int>();
  if (threads < 0) throw UserError("--threads must be 0 (OMP_NUM_THREADS) or a count, got " + std::to_string(threads));
  if (threads > 0) omp_set_num_threads(threads);
  HardwareProfile p = calibrate_local(o);
  if (a.count("link-bandwidth")) p.ici.bandwidth = p.dcn.bandwidth = a["link-bandwidth"].as<double>();
  const std::string out = a["out"].as<std::string>().empty() ? local_profile_path() : a["out"].as<std::string>();
  const std::string kept = keep_from_file(out, p);
  save_profile(p, out);
  Json json = profile_json(p);
  json["path"] = out;
  json["fingerprint"] = p.fingerprint;
  emit(a, json,
       "measured with " + std::to_string(omp_get_max_threads()) + " threads per rank: GEMM " + human(p.flops_fp32, "FLOP/s") + " fp32, " + human(p.flops_bf16, "FLOP/s") +
           " bf16 (the faster of the bf16 and fp32 kernels), memory " + human(p.hbm_bandwidth, "B/s") +
           ", link " + human(p.ici.bandwidth, "B/s") + " (" + human(p.ici.latency, "s") + " per hop)\n" + (kept.empty() ? "" : "kept " + kept + " from the file\n") + "wrote " + out + "\n");
  return 0;
}

}  // namespace

// The subcommands, as `shardlab-plan help` lists them.
constexpr std::pair<const char*, const char*> kCommands[] = {
    {"hw", "a chip's or the local profile's figures (FLOP/s, memory, links)"},
    {"matmul", "one (sharded) matmul: FLOPs, bytes, arithmetic intensity, the bound"},
    {"roofline", "an elementwise op, an einsum or attention: FLOPs, bytes, intensity, the bound"},
    {"collective", "one collective or point-to-point send on a torus or GPU network (fat tree past a node): time, hops, latency bound"},
    {"network", "a GPU cluster's fat tree: per-level bandwidth, collectives spanning nodes, SHARP"},
    {"offload", "an array in host DRAM brought to one chip over DCN + PCIe or PCIe + ICI, then multiplied"},
    {"array", "an array sharded over a named mesh (A[I_X, J_Y]): local shape, bytes per device"},
    {"model", "a Transformer's parameters, FLOPs per token, memory"},
    {"train", "rank training layouts for a model, batch and chip count (or price one)"},
    {"infer", "prefill and decode latency and throughput for a model and batch"},
    {"serve", "serving on a slice: free HBM and largest batch, queries/s, working activations, model-parallel limits, expert and KV sharding's collectives, disaggregation; --max-step-ms: best slice and batch under a latency limit"},
    {"totals", "a whole training run: 6PT FLOPs, days at an MFU, memory per chip, minimum chips"},
    {"calibrate", "measure this machine and write the `local` profile"},
};

int usage(std::ostream& out) {
  out << "usage: shardlab-plan <command> [flags] [--json]\n"
         "       shardlab-plan help [<command>]   (or <command> --help) for a command's flags\n\ncommands:\n";
  for (const auto& [name, what] : kCommands) out << "  " << std::left << std::setw(12) << name << what << "\n";
  return 0;
}

int main(int argc, char** argv) {
  const std::string commands = "hw, matmul, roofline, collective, network, offload, array, model, train, infer, serve, totals, calibrate";
  try {
    if (argc < 2) return usage(std::cerr), 1;
    if (std::string(argv[1]) == "probe-rank") return probe_rank_main(argc, argv);  // one of train --probe's ranks
    std::vector<char*> args_of_help;
    if (std::string(argv[1]) == "help" && argc >= 3) {  // help <command>: <command> --help
      static char help_flag[] = "--help";
      args_of_help = {argv[0], argv[2], help_flag};
      argc = 3;
      argv = args_of_help.data();
    }
    if (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
      return usage(std::cout);
    }
    const std::string command = argv[1];
    cxxopts::Options o("shardlab-plan " + command,
                       std::string("the book's roofline arithmetic (docs/cost_model.md); ") + kSizesHelp);
    o.add_options()("json", "print one JSON object (docs/plan_json.md)")("h,help", "this help")
        ("hw", "hardware profile (shardlab-plan hw)", cxxopts::value<std::string>()->default_value("tpu-v5p"));
    if (command != "calibrate") add_hardware_flags(o);
    int (*run)(const cxxopts::ParseResult&) = nullptr;
    if (command == "hw") {
      add_hw_flags(o);
      run = cmd_hw;
    } else if (command == "matmul") {
      o.add_options()("b,batch", "B: rows of X[B,D] (tokens)", cxxopts::value<std::string>()->default_value("4096"))
          ("d,d-model", "D: the contracting dim", cxxopts::value<std::string>()->default_value("8192"))
          ("f,d-ff", "F: columns of W[D,F]", cxxopts::value<std::string>()->default_value("32768"))
          ("x-dtype", "activations", cxxopts::value<std::string>()->default_value("bf16"))
          ("w-dtype", "weights", cxxopts::value<std::string>()->default_value("bf16"))
          ("out-dtype", "output", cxxopts::value<std::string>()->default_value("bf16"))
          ("shards", "shard D over this many chips", cxxopts::value<int>()->default_value("1"))
          ("cases", "N: the book's four cases of sharding the contracting dim over an axis of N chips, side by side",
           cxxopts::value<int>())
          ("gather-or-reduce", "N: one operand sharded on D over N chips: gather it, or multiply the shards and "
           "AllReduce/ReduceScatter the output (the book's Questions 4 and 9)", cxxopts::value<int>())
          ("sharded", "with --gather-or-reduce: w (W[D_X, F]) or x (X[B, D_X])",
           cxxopts::value<std::string>()->default_value("w"))
          ("tile", "pad D and F up to this tile (mxu: the chip's MXU edge, 128; 256 on v6e)",
           cxxopts::value<std::string>())
          ("sweep", "D:F,D:F,...: the roofline plot as a table, FLOP/s reached for B = 1, 2, 4, ... up to --batch",
           cxxopts::value<std::string>());
      run = cmd_matmul;
    } else if (command == "collective") {
      add_collective_flags(o);
      run = cmd_collective;
    } else if (command == "model" || command == "train" || command == "infer") {
      add_model_flags(o);
      o.add_options()("remat", "none|full|save-matmul|save-mlp-matmul", cxxopts::value<std::string>()->default_value("none"))
          ("kv-dtype", "KV cache dtype", cxxopts::value<std::string>()->default_value("bf16"))
          ("efficiency", "fraction of peak FLOP/s", cxxopts::value<double>()->default_value("1.0"))
          ("list", "list model presets")
          ("batch", command == "infer" ? "sequences decoded together (= --batch-seqs)"
                                       : "tokens per step, e.g. 4M (= --batch-tokens)",
           cxxopts::value<std::string>())
          (command == "infer" ? "batch-seqs" : "batch-tokens", "the same, in its unit's name", cxxopts::value<std::string>())
          ("chips", "chip count", cxxopts::value<int>()->default_value("1"))
          ("precision", "bf16 (mixed, Adam fp32) or fp32; with --cluster local the default is train_gpt's here "
                        "(bf16 where this CPU's bf16 kernels measure faster, else fp32; SHARDLAB_DEFAULT_PRECISION "
                        "decides without measuring)", cxxopts::value<std::string>()->default_value("bf16"))
          ("reduce-dtype", "train: what gradient all_reduce/reduce_scatter over data, fsdp, context carry: fp32, bf16 "
                           "or int8 (block-scaled, sums in fp32; default: the precision's)",
           cxxopts::value<std::string>())
          ("gather-dtype", "train: what the FSDP parameter all_gathers carry: fp32, bf16 or int8 (default as "
                           "--reduce-dtype)",
           cxxopts::value<std::string>())
          ("top", "layouts to show", cxxopts::value<int>()->default_value("10"))
          ("layout", "train: estimate one layout, e.g. data=2,fsdp=4,tensor=2 (axes data, fsdp, context, pipe, expert, "
                     "tensor; context shards each sequence's tokens, for fewer sequences than chips), with the book's "
                     "conditions for it (training.md on TPU tori, gpus.md on GPU networks); exits 0 with its price even when it "
                     "DOES NOT FIT (ranking without --layout exits 2 when no layout fits)",
           cxxopts::value<std::string>())
          ("sharp", "train on a GPU profile: SHARP in-network reduction for every AllReduce over whole switches "
                    "(gpus.md): pure DP's gradient AllReduce in the book's conditions, and the step's collectives")
          ("pods", "train: whole TPU pods of the profile joined by DCN (chips = pods x pod size)", cxxopts::value<int>())
          ("tokens", "train: a run's total tokens, e.g. 15e12: steps and days at the best layout's step time",
           cxxopts::value<std::string>())
          ("cluster", "train: 'local' ranks layouts for this machine as train_gpt predicts its own step (its "
                      "measured profile; each layout also with ZeRO-1/2, sequence parallelism and every pipeline "
                      "schedule)",
           cxxopts::value<std::string>())
          ("probe", "train --cluster local: time each layout's compute here, as train_gpt's start-up probe times "
                    "a run's (one process per rank at once, three rounds; about 2 s per shape for gpt-bench), "
                    "instead of pricing its FLOPs at the profile's rates; prints each layout's speed-up over one "
                    "process")
          ("zero", "train --layout: ZeRO stage over the data axis, 0, 1 or 2 (an fsdp axis is stage 3)",
           cxxopts::value<int>()->default_value("0"))
          ("sequence-parallel", "train --layout: sequence parallelism on the tensor axis")
          ("pp-schedule", "train --layout: the pipe axis's schedule, gpipe, 1f1b, interleaved or zero-bubble",
           cxxopts::value<std::string>()->default_value("1f1b"))
          ("pp-virtual", "train --layout: virtual stages per pipe rank (interleaved)", cxxopts::value<int>()->default_value("1"))
          ("cp-comm", "train: attention over the context axis, ring (ppermutes under each step's block attention, "
                      "as train_gpt's default) or allgather (LLaMA 3's)",
           cxxopts::value<std::string>()->default_value("ring"))
          ("command", "train: print the best layout that fits (or --layout's) as a launch/run.sh ... train_gpt command")
          ("run", "train: run that command (it prints it first; refuses a layout that does not fit)")
          ("train-args", "train: more train_gpt flags for --command/--run, e.g. \"--steps 100\"",
           cxxopts::value<std::string>()->default_value(""))
          ("weights", "weight dtype (infer)", cxxopts::value<std::string>()->default_value("bf16"));
      if (command == "model")
        o.add_options()("params", "N: a bare parameter count, e.g. 70e9 (6N FLOPs/token, weight and state bytes)",
                        cxxopts::value<std::string>())
            ("per-layer", "the chapter's per-layer table: each matmul's einsum, parameters and training FLOPs per token");
      if (command == "train")
        o.add_options()("threads", "train --cluster local: OpenMP threads per rank, as train_gpt --threads (0: "
                                   "cores / chips, at least 1, as launch/run.sh gives them); the profile's figures for "
                                   "that count where it holds them", cxxopts::value<int>()->default_value("0"));
      if (command == "train")
        o.add_options()("batch-seqs", "train: the batch in sequences of --context tokens each (tokens = sequences x T)",
                        cxxopts::value<std::string>());
      if (command == "train")
        o.add_options("model by size (instead of --model or --layers)")(
            "params", "P with --d-model D and --context T: the layer count follows (--d-ff default 4D, --heads D/128, "
                      "--kv-heads N, --vocab 32000)",
            cxxopts::value<std::string>());
      if (command == "infer") add_model_size_flags(o);
      run = command == "model" ? cmd_model : command == "train" ? cmd_train : cmd_infer;
    } else if (command == "roofline") {
      add_roofline_flags(o);
      run = cmd_roofline;
    } else if (command == "network") {
      add_network_flags(o);
      run = cmd_network;
    } else if (command == "offload") {
      add_offload_flags(o);
      run = cmd_offload;
    } else if (command == "serve") {
      add_serve_flags(o);
      run = cmd_serve;
    } else if (command == "totals") {
      add_totals_flags(o);
      run = cmd_totals;
    } else if (command == "array") {
      add_array_flags(o);
      run = cmd_array;
    } else if (command == "calibrate") {
      o.add_options()("out", "profile file (default: the one train_gpt reads, " + local_profile_path() + ")",
                      cxxopts::value<std::string>()->default_value(""))
          ("threads", "OpenMP threads per rank of the runs it is for, as train_gpt --threads (0: OMP_NUM_THREADS)",
           cxxopts::value<int>()->default_value("0"))
          ("gemm-size", "n of the n^3 GEMM", cxxopts::value<int64_t>()->default_value("1024"))
          ("seconds", "time per measurement", cxxopts::value<double>()->default_value("0.3"))
          ("link-bandwidth", "default link bytes/s (e.g. from bench_collectives)", cxxopts::value<double>())
          ("link-latency", "default hop latency, s", cxxopts::value<double>()->default_value("1e-6"))
          ("axis-link", "per-axis link axis=bytes_per_s:latency_s (repeatable)",
           cxxopts::value<std::vector<std::string>>());
      run = cmd_calibrate;
    } else {
      throw UserError("unknown subcommand '" + command + "'; use one of " + commands);
    }
    const cxxopts::ParseResult args = o.parse(argc - 1, argv + 1);
    if (args.count("help")) {
      std::cout << o.help() << "\n";
      return 0;
    }
    if (command == "infer" && !batch_text(args, "seqs"))
      throw UserError("--batch is required for infer (sequences; or --batch-seqs)");
    return run(args);
  } catch (const UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "error: " << bad_command_line(e.what(), argc, argv).what() << "\n";
  }
  return 1;
}
