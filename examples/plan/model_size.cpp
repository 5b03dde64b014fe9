#include "examples/plan/model_size.h"

#include "examples/plan/args.h"
#include "framework/error.h"

namespace shardlab::plan {

using namespace shardlab::cost;

void add_model_size_flags(cxxopts::Options& o) {
  o.add_options("model by size (instead of --model or its dimensions)")
      ("params", "parameters, e.g. 30e9 (their bytes follow --weights)", cxxopts::value<std::string>())
      ("param-bytes", "the weights' bytes, e.g. 30e9 (params = bytes / bytes of --weights)",
       cxxopts::value<std::string>())
      ("kv-bytes-per-token", "KV cache bytes per token of context, e.g. 100e3 (160k = 163,840)",
       cxxopts::value<std::string>());
}

namespace {

// --params or --param-bytes, in parameters (bytes / bytes of the weights' dtype).
double params_flag(const cxxopts::ParseResult& a, DType weights) {
  if (a.count("params") && a.count("param-bytes")) throw UserError("give --params or --param-bytes, not both");
  return a.count("params") ? parse_size(a["params"].as<std::string>(), "params")
                           : parse_size(a["param-bytes"].as<std::string>(), "param-bytes") / bytes_of(weights);
}

}  // namespace

ServedSizes served_from(const cxxopts::ParseResult& a, DType weights) {
  ServedSizes s;
  const bool sized = a.count("params") || a.count("param-bytes");
  if (!a["model"].as<std::string>().empty() || a.count("layers")) {
    s.shape = model_from(a);
    s.model = served_model(*s.shape, parse_dtype(a["kv-dtype"].as<std::string>()));
    s.description = s.shape->describe();
    s.context = s.shape->context;
    s.d = s.shape->d_model, s.f = s.shape->d_ff;
    if (sized) {
      s.model.params = s.model.matmul_params = params_flag(a, weights);
      s.description += " as " + human(s.model.params, "") + " params";
    }
    if (a.count("kv-bytes-per-token"))
      s.model.kv_bytes_per_token = parse_size(a["kv-bytes-per-token"].as<std::string>(), "kv-bytes-per-token");
    return s;
  }
  if (!sized) throw UserError("give --model <preset>, the dimensions (--layers ...), or --params/--param-bytes");
  if (!a.count("kv-bytes-per-token"))
    throw UserError("a model given by --params/--param-bytes needs --kv-bytes-per-token, e.g. 100e3");
  if (!a.count("context")) throw UserError("a model given by --params/--param-bytes needs --context, e.g. 8192");
  const double params = params_flag(a, weights);
  s.model = {params, params, parse_size(a["kv-bytes-per-token"].as<std::string>(), "kv-bytes-per-token"), 0};
  s.context = parse_count(a["context"].as<std::string>(), "context");
  s.d = a.count("d-model") ? a["d-model"].as<int64_t>() : 0;
  s.f = a.count("d-ff") ? a["d-ff"].as<int64_t>() : 0;
  s.description = human(params, "") + " params, " + human(s.model.kv_bytes_per_token, "B") + " KV per token";
  return s;
}

}  // namespace shardlab::plan
