// args: what shardlab-plan's subcommands share -- list flags (sizes: parse_size in
// framework/error.h), the model
// flags, human-readable numbers, and the JSON forms of profiles and rooflines.
#pragma once

#include <cxxopts.hpp>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::plan {

// What `--json` prints: an object whose keys keep the order they were set in.
using Json = nlohmann::ordered_json;

// "4,4,4" -> {4, 4, 4}: non-negative integers separated by `separator`.
std::vector<int> parse_list(const std::string& text, char separator, const std::string& flag);
// {0, 3} -> "(0,3)": a chip's coordinates.
std::string coordinates(const std::vector<int>& c);
// 2.5e-6, "s" -> "2.5 us".
std::string human(double value, const char* unit);
// 6.3e24, "FLOP" -> "6.3e+24 FLOP": for totals past human()'s largest prefix (E).
std::string scientific(double value, const char* unit);

// The hardware a command prices: profile `name` (default --hw), then any figure given as a
// flag in its place (--flops, --flops-fp32, --flops-int8, --hbm, --hbm-bw, --ici-bw or
// --ici-bw-bidir, --latency, --dcn-bw); the description says which were overridden.
// `threads` > 0, for `local`: the figures the profile holds for that many OpenMP threads per
// rank (cost::use_threads), or, given as flags, figures of ranks of that many threads.
cost::HardwareProfile hardware_from(const cxxopts::ParseResult& args, const std::string& name = "", int threads = 0);
// Adds those flags to a command's options.
void add_hardware_flags(cxxopts::Options& options);

// Prints json (with --json) or text.
void emit(const cxxopts::ParseResult& args, const Json& json, const std::string& text);
Json profile_json(const cost::HardwareProfile& p);
Json roofline_json(const cost::Roofline& r);
Json memory_json(const cost::TrainingMemory& m);  // params, grads, optimizer, activations, total
// One line: which bound, the intensities and the time bounds.
std::string explain(const cost::Roofline& r, const char* bandwidth_name);

// --model PRESET and the per-dimension overrides, and the shape they describe; or, where
// the command has --params (train), P with --d-model and --context, the other dimensions
// at their defaults (F = 4D, N = D/128, K = N, V = 32000) unless given and the layer count
// derived (shape_for_params); UserError naming the flags to add when that is not enough.
void add_model_flags(cxxopts::Options& o);
cost::TransformerShape model_from(const cxxopts::ParseResult& a);
// The batch in the unit the command counts it in, from --batch or its explicit spelling:
// `unit` "tokens" (train, model: --batch-tokens) or "seqs" (infer, serve: --batch-seqs).
// nullopt when neither is given; UserError when both are.
std::optional<std::string> batch_text(const cxxopts::ParseResult& a, const std::string& unit);
// train's global batch in tokens: --batch or --batch-tokens, or --batch-seqs sequences of
// the model's context T each (the book's "1024 sequences of length 4096"); UserError when
// none is given or both kinds are.
double train_batch_tokens(const cxxopts::ParseResult& a, const cost::TransformerShape& model);
// What every subcommand's --help says about sizes.
constexpr const char* kSizesHelp =
    "sizes: K/M/G/T are binary (16k = 16384, 4M = 4194304), plain and scientific numbers decimal (4e6 = 4000000)";

// --efficiency: the fraction of peak FLOP/s, in (0, 1].
double efficiency_from(const cxxopts::ParseResult& a);

// The chip count of train and totals: `chips` (their --chips), or --pods whole TPU pods of
// hw (chips = pods x pod size; both given: they must agree). UserError on a GPU profile,
// whose nodes the fat tree prices.
int chips_or_pods(const cxxopts::ParseResult& a, const cost::HardwareProfile& hw, int64_t chips);
// Past one pod (pods > 1, parallel/cost/network/multipod.h): "2 pods of 8960 chips joined by DCN (6.25 GB/s per
// chip): 1.05 M tokens per pod; pure DP across pods hides under the backward pass above
// C/W_dcn = 73.4 k per pod" (batch_tokens 0: without the tokens per pod).
std::string pods_line(const cost::HardwareProfile& hw, int pods, double batch_tokens, cost::DType compute);
// What the book's DP (sharded: FSDP) bar is multiplied by for these wires, as the
// conditions print it after the bar's name: "" for bf16 wires, " x 2 (wires)" for fp32,
// " x 0.502 (wires)" for int8 (wire_critical_factor, parallel/cost/training/axis_conditions.h).
std::string wire_scaling(const cost::WireDtypes& wire, bool sharded);

}  // namespace shardlab::plan
