#include "examples/plan/serve.h"

#include <algorithm>
#include <optional>
#include <string>

#include "examples/plan/args.h"
#include "examples/plan/decode_sharding.h"
#include "examples/plan/model_size.h"
#include "framework/error.h"
#include "parallel/cost/inference/serving.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/train_step.h"

namespace shardlab::plan {

using namespace shardlab::cost;

void add_serve_flags(cxxopts::Options& o) {
  add_model_flags(o);
  add_model_size_flags(o);
  o.add_options("serving")
      ("chips", "chips of the slice (default: the smallest power-of-two slice holding the weights)",
       cxxopts::value<int>())
      ("batch", "sequences decoded together (default: the largest that fits at --context; = --batch-seqs)",
       cxxopts::value<std::string>())
      ("batch-seqs", "the same, in its unit's name", cxxopts::value<std::string>())
      ("weights", "weight dtype: bf16, int8, int4, fp8", cxxopts::value<std::string>()->default_value("bf16"))
      ("kv-dtype", "KV cache dtype (models given by shape)", cxxopts::value<std::string>()->default_value("bf16"))
      ("decode-tokens", "G: tokens generated per query (the book's median 512)",
       cxxopts::value<std::string>()->default_value("512"))
      ("prompt-tokens", "P: prompt length, prefilled (default --context)", cxxopts::value<std::string>())
      ("efficiency", "prefill's fraction of peak FLOP/s (the book's 40% MFU)",
       cxxopts::value<double>()->default_value("0.4"))
      ("prefill-chips", "chips of one prefill server (default --chips)", cxxopts::value<int>())
      ("qps", "traffic in queries/s: how many prefill and decode servers it needs", cxxopts::value<double>())
      ("axes", "torus axes the model-parallel axis spans (ICI bandwidth and the training bound scale)",
       cxxopts::value<int>()->default_value("1"))
      ("x-2d", "2D weight-stationary: price this X (D split) instead of the optimum", cxxopts::value<double>())
      ("cached-prefix", "tokens of each prompt found in a prefix cache (prefill skips them)",
       cxxopts::value<std::string>()->default_value("0"))
      ("cache-bytes", "prefix-cache memory (e.g. host DRAM 450G): how many prompts' caches it holds",
       cxxopts::value<std::string>())
      ("max-step-ms", "latency limit per decode step: search power-of-two slices (up to --max-chips) and batches for "
                      "the most tokens/s per chip within it", cxxopts::value<double>())
      ("max-chips", "largest slice --max-step-ms tries", cxxopts::value<int>()->default_value("256"))
      ("step-ms", "take the decode step as given (measured, or a figure such as the book's 19 ms) instead of the "
                  "roofline's: tokens/s, queries/s and disaggregation at that step", cxxopts::value<double>());
  add_decode_sharding_flags(o);
}

namespace {

int64_t count_flag(const cxxopts::ParseResult& a, const char* flag, int64_t otherwise) {
  return a.count(flag) ? parse_count(a[flag].as<std::string>(), flag) : otherwise;
}

// --max-step-ms: each slice's largest batch within the limit, and the best per chip.
int serve_under_latency(const cxxopts::ParseResult& a, const ServedSizes& s, DType weights, const HardwareProfile& hw) {
  const double limit = a["max-step-ms"].as<double>() * 1e-3;
  const InferenceConfig c{.context = s.context, .weights = weights};
  const LatencyLimitedServing r = best_serving_under_latency(s.model, c, limit, a["max-chips"].as<int>(), hw);
  std::string text = s.description + "\nweights " + to_string(weights) + ", context " + std::to_string(s.context) +
                     ", decode steps within " + human(limit, "s") + " on " + hw.name + ":\n";
  Json slices = Json::array();
  for (const LatencyLimitedSlice& x : r.slices) {
    const bool best = r.best >= 0 && &x == &r.slices[r.best];
    text += "  " + std::to_string(x.chips) + " chips: ";
    text += x.batch > 0 ? "batch " + std::to_string(x.batch) + " of " + std::to_string(x.max_batch) + " that fit, step " +
                              human(x.step.step_seconds, "s") + ", " + human(x.step.tokens_per_second, "tokens/s") +
                              " (" + human(x.step.tokens_per_second_per_chip, "tokens/s") + " per chip)" +
                              (best ? "  <- best" : "")
                        : x.max_batch > 0 ? "none: batch 1 takes " + human(x.step.step_seconds, "s")
                                          : "none: no room for one KV cache";
    text += "\n";
    slices.push_back(Json{{"chips", x.chips}, {"max_batch_seqs", x.max_batch}, {"batch_seqs", x.batch},
                          {"step_seconds", x.step.step_seconds}, {"tokens_per_second", x.step.tokens_per_second},
                          {"tokens_per_second_per_chip", x.step.tokens_per_second_per_chip}, {"best", best}});
  }
  if (r.best < 0) text += "no slice up to --max-chips meets the limit; give a larger --max-step-ms or --max-chips\n";
  emit(a, Json{{"hw", hw.name}, {"model", s.description}, {"weights_dtype", to_string(weights)},
               {"context_tokens", s.context}, {"max_step_seconds", limit}, {"slices", slices}},
       text);
  return r.best >= 0 ? 0 : 2;
}

}  // namespace

int cmd_serve(const cxxopts::ParseResult& a) {
  const HardwareProfile hw = hardware_from(a);
  const DType weights = parse_dtype(a["weights"].as<std::string>());
  const ServedSizes s = served_from(a, weights);
  if (a.count("max-step-ms")) return serve_under_latency(a, s, weights, hw);
  const ServedModel& m = s.model;
  const int chips = a.count("chips") ? a["chips"].as<int>() : slice_chips(m.params * bytes_of(weights), hw);
  const SliceMemory mem = slice_memory(m, weights, chips, s.context, hw);
  const std::optional<std::string> batch_flag = batch_text(a, "seqs");
  const int64_t batch = batch_flag ? parse_count(*batch_flag, "batch") : mem.max_batch;
  if (batch < 1) {
    throw UserError("the weights (" + human(mem.weight_bytes, "B") + ") leave no room for one " + std::to_string(s.context) +
                    "-token KV cache in " + std::to_string(chips) + " x " + human(hw.hbm_bytes, "B") +
                    "; give --chips " + std::to_string(2 * std::max(chips, mem.weight_slice_chips)) +
                    " or more, or --batch");
  }
  InferenceConfig c{.batch = batch, .context = s.context, .chips = chips, .weights = weights,
                    .efficiency = efficiency_from(a)};
  const int64_t generated = count_flag(a, "decode-tokens", 512);
  const double given_step = a.count("step-ms") ? a["step-ms"].as<double>() * 1e-3 : 0;
  if (a.count("step-ms") && !(given_step > 0))
    throw UserError("--step-ms " + format_number(a["step-ms"].as<double>()) + " must be a positive step time in ms");
  const DecodeRun run = decode_run(m, c, generated, hw, given_step);
  const DecodeEstimate& d = run.step;

  const int64_t prompt = count_flag(a, "prompt-tokens", s.context);
  const int64_t cached = count_flag(a, "cached-prefix", 0);
  const double cache_bytes = a.count("cache-bytes") ? parse_size(a["cache-bytes"].as<std::string>(), "cache-bytes") : 0;
  const PrefixCache prefix = prefix_cache(prompt, cached, cache_bytes, m.kv_bytes_per_token);
  InferenceConfig p = c;
  p.batch = 1;
  p.context = prompt - cached;
  p.chips = a.count("prefill-chips") ? a["prefill-chips"].as<int>() : chips;
  const PrefillEstimate pre = estimate_prefill(m, p, hw);
  const Eviction ev = eviction(batch, prompt, generated, m.kv_bytes_per_token);
  const double qps = a.count("qps") ? a["qps"].as<double>() : 0;
  const Disaggregation dis = disaggregation(pre.seconds, d.step_seconds, batch, generated, qps);

  // An MoE layer's experts each see k/E of the batch: their matmuls need E/k times the batch.
  const bool moe = s.shape && s.shape->experts > 0;
  const double moe_critical = moe ? moe_critical_batch(d.critical_batch, s.shape->experts, s.shape->top_k) : 0;
  const std::string moe_text = moe ? " (experts: " + human(moe_critical, "") + ", x E/k = " +
                                         std::to_string(s.shape->experts) + "/" + std::to_string(s.shape->top_k) + ")"
                                   : std::string();
  const std::string on = std::to_string(chips) + " x " + hw.name;
  std::string text = s.description + "\nweights " + to_string(weights) + " on " + on + "\nmemory: weights " +
                     human(mem.weight_bytes, "B") + " = " + scientific(mem.weight_chips, "chips'") +
                     " HBM (smallest power-of-two slice " + std::to_string(mem.weight_slice_chips) + "); " +
                     human(mem.hbm_bytes, "B") + " HBM leaves " + human(mem.free_bytes, "B") + " (" +
                     human(mem.free_bytes / chips, "B") + " per chip) = " +
                     std::to_string(mem.max_batch) + " KV caches of " + std::to_string(s.context) + " tokens (" +
                     human(mem.kv_bytes_per_sequence, "B") + " each)\n";
  text += "decode, batch " + std::to_string(batch) + " at context " + std::to_string(s.context) + ": " +
          human(d.step_seconds, "s") + " per step (" +
          (given_step > 0 ? "given; priced: weights " : "weights ") + human(d.params_seconds, "s") + " + KV " +
          human(d.attention_seconds, "s") + (d.memory_bound ? ", memory-bound" : ", weights compute-bound") + "), " +
          human(d.tokens_per_second, "tokens/s") + " (" + human(d.tokens_per_second_per_chip, "tokens/s") +
          " per chip); weights + KV need >= " + std::to_string(d.min_chips) + " chips (a " +
          std::to_string(slice_chips(d.weight_bytes + d.kv_bytes, hw)) + "-chip slice)" +
          (d.fits ? "" : ": DOES NOT FIT") + "\n  " + std::to_string(generated) +
          " tokens per query: " + human(run.seconds, "s") + "; " + scientific(run.queries_per_second, "queries/s") + " (" +
          scientific(run.queries_per_second_per_chip, "queries/s") + " per chip); weights turn compute-bound above batch " +
          human(d.critical_batch, "") + moe_text + "\n";

  std::optional<DecodeActivations> act;  // needs the shape
  if (s.shape) {
    act = decode_activations(*s.shape, batch);
    text += "  working activations of a step (bf16, one stage at a time): peak " + human(act->peak_bytes, "B") +
            " (attention " + human(act->attention_bytes, "B") + ", MLP " + human(act->mlp_bytes, "B") + ", head " +
            human(act->head_bytes, "B") + ") beside " + human(d.kv_bytes, "B") + " of KV; unfused, a layer's scores [B, N, T] add " +
            human(act->scores_bytes, "B") + " (peak " + human(act->unfused_peak_bytes, "B") + ")\n";
  }
  Json json{{"hw", hw.name}, {"model", s.description}, {"weights_dtype", to_string(weights)}, {"chips", chips},
            {"context_tokens", s.context}, {"batch_seqs", batch},
            {"memory", Json{{"hbm_bytes", mem.hbm_bytes}, {"weight_bytes", mem.weight_bytes},
                            {"weight_chips", mem.weight_chips}, {"weight_slice_chips", mem.weight_slice_chips},
                            {"free_hbm_bytes", mem.free_bytes}, {"free_hbm_bytes_per_chip", mem.free_bytes / chips},
                            {"kv_bytes_per_token", m.kv_bytes_per_token},
                            {"kv_bytes_per_seq", mem.kv_bytes_per_sequence}, {"max_batch_seqs", mem.max_batch}}},
            {"decode", Json{{"step_seconds", d.step_seconds}, {"step_given", given_step > 0},
                            {"weights_seconds", d.params_seconds},
                            {"kv_seconds", d.attention_seconds}, {"memory_bound", d.memory_bound},
                            {"critical_batch_seqs", d.critical_batch},
                            {"expert_critical_batch_seqs", moe_critical}, {"fits", d.fits},
                            {"min_chips", d.min_chips},
                            {"min_slice_chips", slice_chips(d.weight_bytes + d.kv_bytes, hw)},
                            {"tokens_per_second", d.tokens_per_second},
                            {"tokens_per_second_per_chip", d.tokens_per_second_per_chip},
                            {"decode_tokens", generated}, {"query_seconds", run.seconds},
                            {"queries_per_second", run.queries_per_second},
                            {"queries_per_second_per_chip", run.queries_per_second_per_chip}}}};

  if (act) {
    json["decode_activations"] = Json{{"peak_bytes", act->peak_bytes}, {"attention_bytes", act->attention_bytes},
                                      {"mlp_bytes", act->mlp_bytes}, {"head_bytes", act->head_bytes},
                                      {"scores_bytes", act->scores_bytes},
                                      {"unfused_peak_bytes", act->unfused_peak_bytes}};
  }
  if (s.d > 0 && s.f > 0) {
    const ShardingDTypes types{.weights = weights, .axes = a["axes"].as<int>()};
    const GenerationSharding g = generation_sharding(batch, s.d, s.f, chips, types, hw);
    const WeightStationary2d w2 = weight_stationary_2d(batch, s.d, s.f, chips,
                                                       a.count("x-2d") ? a["x-2d"].as<double>() : 0, DType::kBf16, hw);
    text += "model-sharded decode matmul [B,D] x [D,F/" + std::to_string(chips) + "] per chip: ICI " +
            human(g.ici_seconds, "s") + ", HBM " + human(g.hbm_seconds, "s") + ", math " + human(g.math_seconds, "s") +
            " (" + g.bound + "-bound)\n  ICI passes HBM above " + human(g.max_y, "") + "-way sharding (F / (B beta), beta = W_hbm / W_ici = " +
            human(g.beta, "") + "); compute-bound (training) up to " + human(g.compute_bound_max_y, "") + "-way over " +
            std::to_string(types.axes) + " axis(es); the activations' all-gather is latency-bound past " +
            human(g.latency_bound_y, "") + "-way\n2D weight-stationary MLP on " + std::to_string(chips) +
            " chips: X = " + human(w2.x, "") + ", YZ = " + human(w2.yz, "") + " (optimum X " + human(w2.optimal_x, "") +
            "): comms " + human(w2.comms_2d_seconds, "s") + " vs 1D " + human(w2.comms_1d_seconds, "s") +
            ", math " + human(w2.math_seconds, "s") + "; 2D moves less above " + human(w2.crossover_chips, "") +
            " chips (18 F / D)\n";
    json["model_sharding"] = Json{{"ici_seconds", g.ici_seconds}, {"hbm_seconds", g.hbm_seconds},
                                  {"math_seconds", g.math_seconds}, {"bound", g.bound}, {"beta", g.beta},
                                  {"max_model_parallel", g.max_y}, {"compute_bound_max_model_parallel", g.compute_bound_max_y},
                                  {"latency_bound_model_parallel", g.latency_bound_y}};
    json["weight_stationary_2d"] = Json{{"x", w2.x}, {"yz", w2.yz}, {"optimal_x", w2.optimal_x},
                                        {"comms_2d_seconds", w2.comms_2d_seconds},
                                        {"comms_1d_seconds", w2.comms_1d_seconds}, {"math_seconds", w2.math_seconds},
                                        {"crossover_chips", w2.crossover_chips}};
  }

  text += "prefill of " + std::to_string(prompt) + " tokens" +
          (cached > 0 ? " (" + std::to_string(cached) + " cached, " + human(100 * prefix.prefill_fraction, "") + "% computed)"
                      : std::string()) +
          " on " + std::to_string(p.chips) + " chips at " + human(100 * c.efficiency, "") + "% of peak: " +
          human(pre.seconds, "s") + "\ntraffic (P " + std::to_string(prompt) + ", G " + std::to_string(generated) +
          "): per decode step " + scientific(ev.sequences_per_step, "sequences") + " finish, " +
          human(ev.tokens_per_step, "") + " tokens (" + human(ev.bytes_per_step, "B") + ") of KV evicted\n";
  json["prefill"] = Json{{"prompt_tokens", prompt}, {"cached_prefix_tokens", cached}, {"chips", p.chips},
                         {"seconds", pre.seconds}, {"compute_bound", pre.compute_bound}};
  json["eviction"] = Json{{"seqs_per_step", ev.sequences_per_step}, {"tokens_per_step", ev.tokens_per_step},
                          {"bytes_per_step", ev.bytes_per_step}};
  text += "  interleaved on one server: " + scientific(dis.interleaved_qps, "queries/s") + "; disaggregated: " +
          human(dis.prefill_per_decode, "") + " prefill servers per decode server (" +
          scientific(dis.prefill_server_qps, "queries/s") + " vs " + scientific(dis.decode_server_qps, "queries/s") + ")";
  if (qps > 0)
    text += "; " + scientific(qps, "queries/s") + " need " + std::to_string(dis.prefill_servers) + " prefill + " +
            std::to_string(dis.decode_servers) + " decode servers";
  text += "\n";
  json["disaggregation"] = Json{{"prefill_per_decode_server", dis.prefill_per_decode},
                                {"prefill_server_queries_per_second", dis.prefill_server_qps},
                                {"decode_server_queries_per_second", dis.decode_server_qps},
                                {"interleaved_queries_per_second", dis.interleaved_qps},
                                {"traffic_queries_per_second", qps}, {"prefill_servers", dis.prefill_servers},
                                {"decode_servers", dis.decode_servers}};
  if (cache_bytes > 0) {
    text += "  prefix cache of " + human(cache_bytes, "B") + " holds " + std::to_string(prefix.prompts_held) + " prompts' KV\n";
    json["prefix_cache"] = Json{{"cache_bytes", cache_bytes}, {"prompts_held", prefix.prompts_held},
                                {"prefill_fraction", prefix.prefill_fraction}};
  }
  decode_sharding_sections(a, s.shape, batch, s.context, chips, weights, hw, text, json);
  emit(a, json, text);
  return 0;
}

}  // namespace shardlab::plan
