#include "examples/plan/roofline.h"

#include <map>
#include <string>
#include <vector>

#include "examples/plan/args.h"
#include "framework/error.h"
#include "parallel/cost/roofline/ops.h"
#include "parallel/cost/sharding/sharded_array.h"

namespace shardlab::plan {

using namespace shardlab::cost;

void add_roofline_flags(cxxopts::Options& o) {
  add_model_flags(o);
  o.add_options("op (give one of --flop-count, --elementwise, --einsum, --attention)")
      ("flop-count", "N: a bare FLOP count, timed at the chip's peak in --dtype (e.g. 1e12)", cxxopts::value<std::string>())
      ("elementwise", "N: elements of an elementwise op (suffixes ok)", cxxopts::value<std::string>())
      ("vector", "elementwise: run on the vector units (VPU / CUDA cores: ALUs x clock), not the matmul units")
      ("inputs", "elementwise: arrays read (one is written)", cxxopts::value<int>()->default_value("2"))
      ("flops-per-element", "elementwise: operations per element", cxxopts::value<double>()->default_value("1"))
      ("einsum", "an einsum spec, e.g. bd,df->bf (one letter per dim)", cxxopts::value<std::string>())
      ("dims", "einsum: every letter's size, e.g. b=4096,d=8192,f=32k", cxxopts::value<std::string>())
      ("dtypes", "einsum: one dtype per input, then the output, e.g. bf16,int8,bf16", cxxopts::value<std::string>())
      ("mesh", "einsum with --shard: named mesh axes, e.g. X=4,Y=8,Z=4", cxxopts::value<std::string>())
      ("shard", "einsum: dims split over --mesh axes, e.g. b=X,d=Y: FLOPs per device and over the mesh",
       cxxopts::value<std::string>())
      ("attention", "dot-product attention of --model (or --heads --kv-heads --head-dim) at --context")
      ("kv-length", "attention: S, the key/value positions (default --context; decode: --context 1)",
       cxxopts::value<std::string>())
      ("batch-seqs", "attention: sequences in the batch", cxxopts::value<std::string>()->default_value("1"))
      ("dtype", "element type: fp32, bf16, fp8, int8, int4", cxxopts::value<std::string>()->default_value("bf16"));
}

namespace {

// "--flag" entries "d=value", comma-separated, one letter each -> {d: value}.
std::map<char, std::string> parse_letters(const std::string& text, const char* flag, const char* example) {
  std::map<char, std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t stop = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, stop - start);
    if (entry.size() < 3 || entry[1] != '=')
      throw UserError(std::string("--") + flag + " entry '" + entry + "' must look like " + example +
                      " (one letter, '=', a value)");
    if (out.count(entry[0])) throw UserError(std::string("--") + flag + " gives " + std::string(1, entry[0]) + " twice");
    out[entry[0]] = entry.substr(2);
    start = stop + 1;
  }
  return out;
}

// "b=4096,d=8k" -> {b: 4096, d: 8192}.
std::map<char, int64_t> parse_dims(const std::string& text) {
  std::map<char, int64_t> dims;
  for (const auto& [letter, size] : parse_letters(text, "dims", "d=8192")) dims[letter] = parse_count(size, "dims");
  return dims;
}

std::vector<DType> parse_dtypes(const std::string& text) {
  std::vector<DType> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t stop = std::min(text.find(',', start), text.size());
    out.push_back(parse_dtype(text.substr(start, stop - start)));
    start = stop + 1;
  }
  return out;
}

int einsum(const cxxopts::ParseResult& a, const HardwareProfile& hw) {
  const std::string spec = a["einsum"].as<std::string>();
  if (!a.count("dims")) throw UserError("--einsum needs --dims, every letter's size, e.g. b=4096,d=8192,f=32768");
  const std::map<char, int64_t> dims = parse_dims(a["dims"].as<std::string>());
  const std::vector<DType> dtypes =
      a.count("dtypes") ? parse_dtypes(a["dtypes"].as<std::string>()) : std::vector{parse_dtype(a["dtype"].as<std::string>())};
  const Roofline r = einsum_roofline(spec, dims, dtypes, hw);
  const EinsumSpec e = parse_einsum(spec);
  Json sizes = Json::object();
  std::string listed;
  for (const auto& [letter, size] : dims) {
    sizes[std::string(1, letter)] = size;
    listed += (listed.empty() ? "" : " ") + std::string(1, letter) + "=" + std::to_string(size);
  }
  std::string types;
  for (DType t : dtypes) types += (types.empty() ? "" : ",") + to_string(t);
  Json json{{"hw", hw.name}, {"op", "einsum"}, {"einsum", spec}, {"dims", sizes}, {"contracted", e.contracted()},
            {"dtypes", types}, {"roofline", roofline_json(r)}};
  std::string text = "einsum " + spec + " with " + listed + " (" + types + ") on " + hw.name + "\n  " +
                     human(r.flops, "FLOP") + (e.contracted().empty() ? "" : " (contracting " + e.contracted() + ")") +
                     ", " + human(r.bytes, "B") + " read and written\n  " + explain(r, "memory");
  if (a.count("shard")) {  // the FLOPs each device and the whole mesh perform
    if (!a.count("mesh")) throw UserError("--shard needs --mesh, the named axes it splits dims over, e.g. X=4,Y=8,Z=4");
    const std::map<char, std::string> axes = parse_letters(a["shard"].as<std::string>(), "shard", "b=X");
    for (const auto& [letter, entry] : axes) {
      if (!dims.count(letter)) throw UserError("--shard splits " + std::string(1, letter) + ", which --dims does not give");
    }
    const ShardedFlops f = sharded_flops(r.flops, axes, parse_named_mesh(a["mesh"].as<std::string>()));
    text += "  sharded " + a["shard"].as<std::string>() + " on mesh " + a["mesh"].as<std::string>() + ": " +
            human(f.per_device, "FLOP") + " per device (1/" + std::to_string(f.split) + "), replicated " +
            std::to_string(f.replication) + "x: " + human(f.over_mesh, "FLOP") + " over the mesh\n";
    json.update(Json{{"shard", a["shard"].as<std::string>()}, {"mesh", a["mesh"].as<std::string>()},
                     {"flops_per_device", f.per_device}, {"split", f.split}, {"replication", f.replication},
                     {"flops_over_mesh", f.over_mesh}});
  }
  emit(a, json, text);
  return 0;
}

int flop_count(const cxxopts::ParseResult& a, const HardwareProfile& hw) {
  const double n = parse_size(a["flop-count"].as<std::string>(), "flop-count");
  const DType dtype = parse_dtype(a["dtype"].as<std::string>());
  const double peak = peak_flops(hw, dtype);
  const double vector = vector_flops(hw);
  Json json{{"hw", hw.name}, {"op", "flop_count"}, {"flops", n}, {"dtype", to_string(dtype)},
            {"peak_flops_per_s", peak}, {"t_math_s", n / peak}};
  std::string text = human(n, "FLOP") + " (" + to_string(dtype) + ") on " + hw.name + ": " + human(n / peak, "s") +
                     " at the matmul units' " + human(peak, "FLOP/s");
  if (vector > 0) {
    json["vector_flops_per_s"] = vector;
    json["t_vector_s"] = n / vector;
    text += "; " + human(n / vector, "s") + " on the vector units' " + human(vector, "FLOP/s");
  } else {
    json["vector_flops_per_s"] = nullptr;
    json["t_vector_s"] = nullptr;
    text += "; vector units' FLOP/s unknown (the book gives no clock: give --clock)";
  }
  emit(a, json, text + "\n");
  return 0;
}

int elementwise(const cxxopts::ParseResult& a, const HardwareProfile& matmul_hw) {
  HardwareProfile hw = matmul_hw;
  if (a.count("vector")) {
    const double vector = vector_flops(hw);
    if (vector <= 0)
      throw UserError("--vector: " + hw.name +
                      "'s vector FLOP/s is unknown (no clock in the book); give its clock with --clock "
                      "(tpus.md: v5p about 1.75e9) or drop --vector and give the VPU's FLOP/s with --flops");
    hw.flops_bf16 = hw.flops_fp32 = hw.flops_int8 = hw.flops_fp8 = vector;
  }
  const double n = parse_size(a["elementwise"].as<std::string>(), "elementwise");
  const int inputs = a["inputs"].as<int>();
  const double per_element = a["flops-per-element"].as<double>();
  const DType dtype = parse_dtype(a["dtype"].as<std::string>());
  if (inputs < 1) throw UserError("--inputs " + std::to_string(inputs) + " must be >= 1: the arrays the op reads");
  const Roofline r = elementwise_roofline(n, inputs, per_element, dtype, hw);
  emit(a,
       Json{{"hw", hw.name}, {"op", "elementwise"}, {"elements", n}, {"inputs", inputs},
            {"flops_per_element", per_element}, {"dtype", to_string(dtype)},
            {"units", a.count("vector") ? "vector" : "matmul"}, {"roofline", roofline_json(r)}},
       "elementwise op over " + human(n, "") + " " + to_string(dtype) + " elements (" + std::to_string(inputs) +
           " read, 1 written, " + human(per_element, "FLOP") + " each) on " + hw.name + (a.count("vector") ? "'s vector units (" + human(peak_flops(hw, dtype), "FLOP/s") + ")" : "") +
           "\n  " + explain(r, "memory"));
  return 0;
}

int attention(const cxxopts::ParseResult& a, const HardwareProfile& hw) {
  // The heads from a preset (with any overrides) or from the flags alone.
  TransformerShape s;
  if (!a["model"].as<std::string>().empty()) {
    s = model_from(a);
  } else {
    if (!a.count("heads")) throw UserError("--attention needs --model or --heads (and --kv-heads, --head-dim or --d-model)");
    s.heads = a["heads"].as<int64_t>();
    s.kv_heads = a.count("kv-heads") ? a["kv-heads"].as<int64_t>() : s.heads;
    s.d_model = a.count("d-model") ? a["d-model"].as<int64_t>() : 0;
    s.head_dim = a.count("head-dim") ? a["head-dim"].as<int64_t>() : s.heads > 0 ? s.d_model / s.heads : 0;
    if (!a.count("context")) throw UserError("--attention needs --context, the query length T (1 for a decode step)");
    s.context = parse_count(a["context"].as<std::string>(), "context");
  }
  AttentionShape shape{.batch = parse_count(a["batch-seqs"].as<std::string>(), "batch-seqs"),
                       .q_len = s.context,
                       .kv_len = a.count("kv-length") ? parse_count(a["kv-length"].as<std::string>(), "kv-length")
                                                      : s.context,
                       .heads = s.heads,
                       .kv_heads = s.kv_heads,
                       .head_dim = s.head_dim,
                       .dtype = parse_dtype(a["dtype"].as<std::string>())};
  const AttentionRoofline r = attention_roofline(shape, hw);
  Json json{{"hw", hw.name},          {"op", "attention"},          {"batch_seqs", shape.batch},
            {"q_len", shape.q_len},   {"kv_len", shape.kv_len},     {"heads", shape.heads},
            {"kv_heads", shape.kv_heads}, {"head_dim", shape.head_dim}, {"dtype", to_string(shape.dtype)},
            {"roofline", roofline_json(r.roofline)}, {"compute_bound_context", r.compute_bound_context},
            {"decode_intensity_limit", r.decode_intensity_limit}};
  std::string text = "attention, " + std::to_string(shape.batch) + " x T=" + std::to_string(shape.q_len) +
                     " queries against S=" + std::to_string(shape.kv_len) + " keys, N=" + std::to_string(shape.heads) +
                     " K=" + std::to_string(shape.kv_heads) + " H=" + std::to_string(shape.head_dim) + " in " +
                     to_string(shape.dtype) + " on " + hw.name + "\n  " + explain(r.roofline, "memory") +
                     "  self-attention (S = T) is compute-bound above T = " + human(r.compute_bound_context, "") +
                     "; decoding (T = 1) its intensity tends to " + human(r.decode_intensity_limit, "") + "\n";
  if (s.d_model > 0) {
    const double crossover = attention_crossover_context(s);
    json["matmul_crossover_context"] = crossover;
    text += "  attention's FLOPs match the Q/K/V/O projections' at T = " + human(crossover, "") + " (D=" +
            std::to_string(s.d_model) + ")\n";
  }
  emit(a, json, text);
  return 0;
}

}  // namespace

int cmd_roofline(const cxxopts::ParseResult& a) {
  const int modes =
      static_cast<int>(a.count("flop-count") + a.count("elementwise") + a.count("einsum") + a.count("attention"));
  if (modes != 1)
    throw UserError("give exactly one of --flop-count N, --elementwise N, --einsum SPEC --dims ..., --attention (got " +
                    std::to_string(modes) + ")");
  const HardwareProfile hw = hardware_from(a);
  if (a.count("flop-count")) return flop_count(a, hw);
  if (a.count("einsum")) return einsum(a, hw);
  if (a.count("elementwise")) return elementwise(a, hw);
  return attention(a, hw);
}

}  // namespace shardlab::plan
