#include "parallel/cost/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "framework/error.h"

namespace shardlab::cost {
namespace {

TransformerShape llama(std::string name, int64_t l, int64_t d, int64_t f, int64_t n, int64_t k,
                       int64_t v, int64_t context, int64_t experts = 0, int64_t top_k = 1) {
  TransformerShape s;
  s.name = std::move(name);
  s.layers = l;
  s.d_model = d;
  s.d_ff = f;
  s.heads = n;
  s.kv_heads = k;
  s.head_dim = d / n;
  s.vocab = v;
  s.context = context;
  s.experts = experts;
  s.top_k = top_k;
  return s;
}

TransformerShape gpt2(std::string name, int64_t l, int64_t d, int64_t n) {
  TransformerShape s = llama(std::move(name), l, d, 4 * d, n, n, 50257, 1024);
  s.learned_positions = 1024;
  s.gated_mlp = false;
  s.layer_norm = true;
  s.bias = true;
  s.tied_embeddings = true;
  return s;
}

const std::vector<TransformerShape>& presets() {
  static const std::vector<TransformerShape> all = {
      gpt2("gpt2-124m", 12, 768, 12),
      gpt2("gpt2-350m", 24, 1024, 16),
      gpt2("gpt2-774m", 36, 1280, 20),
      gpt2("gpt2-1.5b", 48, 1600, 25),
      llama("llama2-7b", 32, 4096, 11008, 32, 32, 32000, 4096),
      llama("llama2-13b", 40, 5120, 13824, 40, 40, 32000, 4096),
      llama("llama2-70b", 80, 8192, 28672, 64, 8, 32000, 4096),
      llama("llama3-8b", 32, 4096, 14336, 32, 8, 128256, 8192),
      llama("llama3-70b", 80, 8192, 28672, 64, 8, 128256, 8192),
      llama("llama3-405b", 126, 16384, 53248, 128, 8, 128256, 8192),
      llama("mixtral-8x7b", 32, 4096, 14336, 32, 8, 32000, 32768, 8, 2),
  };
  return all;
}

double norm_params(const TransformerShape& s) { return (s.layer_norm ? 2.0 : 1.0) * s.d_model; }

}  // namespace

void TransformerShape::validate() const {
  const std::pair<const char*, int64_t> sizes[] = {{"layers L", layers},   {"d_model D", d_model},
                                                   {"d_ff F", d_ff},       {"heads N", heads},
                                                   {"kv_heads K", kv_heads}, {"head_dim H", head_dim},
                                                   {"vocab V", vocab},     {"context T", context}};
  for (const auto& [what, value] : sizes)
    if (value <= 0) throw UserError(std::string("model ") + what + " must be positive, got " + std::to_string(value));
  if (heads % kv_heads != 0)
    throw UserError("kv_heads K=" + std::to_string(kv_heads) + " must divide heads N=" + std::to_string(heads));
  if (experts < 0 || (experts > 0 && (top_k < 1 || top_k > experts)))
    throw UserError("top_k=" + std::to_string(top_k) + " must be in [1, experts=" + std::to_string(experts) + "]");
  if (experts > 0 && (moe_every < 1 || moe_every > layers))
    throw UserError("moe_every=" + std::to_string(moe_every) + " must be in [1, layers=" + std::to_string(layers) + "]");
}

std::string TransformerShape::describe() const {
  std::ostringstream out;
  out << (name.empty() ? "custom" : name) << ": L=" << layers << " D=" << d_model << " F=" << d_ff
      << " N=" << heads << " K=" << kv_heads << " H=" << head_dim << " V=" << vocab << " T=" << context;
  if (experts > 0) out << " E=" << experts << " top_k=" << top_k;
  if (experts > 0 && moe_every > 1) out << " moe_every=" << moe_every;
  out << (gated_mlp ? " gated-mlp" : " gelu-mlp") << (tied_embeddings ? " tied" : "");
  return out.str();
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& s : presets()) names.push_back(s.name);
  for (const auto& n : nn::ModelConfig::preset_names()) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);  // the cost model's own first
  }
  return names;
}

TransformerShape model_preset(const std::string& name) {
  for (const auto& s : presets())
    if (s.name == name) return s;
  const auto own = nn::ModelConfig::preset_names();
  if (std::find(own.begin(), own.end(), name) != own.end()) {
    TransformerShape s = shape_of(nn::ModelConfig::preset(name));
    s.name = name;
    return s;
  }
  std::string known;
  for (const auto& n : model_preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw UserError("unknown model preset '" + name + "'; known presets: " + known +
                  " (or give the dimensions: --layers --d-model --d-ff --heads ...)");
}

TransformerShape shape_of(const nn::ModelConfig& c) {
  TransformerShape s;
  s.name = c.describe();
  s.layers = c.n_layers;
  s.d_model = c.d_model;
  s.d_ff = c.d_ff;
  s.heads = c.n_heads;
  s.kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim();
  s.vocab = c.vocab;
  s.context = c.context;
  const bool gpt = c.arch == nn::Arch::Gpt;
  s.gated_mlp = !gpt;
  s.layer_norm = gpt;
  s.bias = gpt;
  s.tied_embeddings = gpt;
  s.learned_positions = gpt ? c.context : 0;
  s.experts = c.experts;
  s.top_k = c.top_k;
  s.moe_every = c.moe_every;
  return s;
}

std::optional<nn::ModelConfig> model_config_of(const TransformerShape& s) {
  nn::ModelConfig c;
  c.arch = s.gated_mlp ? nn::Arch::Llama : nn::Arch::Gpt;
  c.n_layers = s.layers, c.d_model = s.d_model, c.d_ff = s.d_ff, c.n_heads = s.heads, c.n_kv_heads = s.kv_heads;
  c.vocab = s.vocab, c.context = s.context;
  c.experts = s.experts, c.top_k = s.top_k, c.moe_every = s.moe_every;
  const TransformerShape built = shape_of(c);
  const bool same = built.head_dim == s.head_dim && built.layer_norm == s.layer_norm && built.bias == s.bias &&
                    built.tied_embeddings == s.tied_embeddings && built.learned_positions == s.learned_positions;
  if (!same || s.heads <= 0 || s.d_model % s.heads != 0) return std::nullopt;
  return c;
}

ParamCounts count_params(const TransformerShape& s) {
  s.validate();
  const double l = s.layers, d = s.d_model, f = s.d_ff, h = s.head_dim;
  const double q = s.heads * h, kv = s.kv_heads * h;
  ParamCounts p;
  p.attention = l * (2 * d * q + 2 * d * kv + (s.bias ? q + 2 * kv + d : 0));
  const double expert = (s.gated_mlp ? 3 : 2) * d * f + (s.bias ? (s.gated_mlp ? 2 * f : f) + d : 0);
  const double moe = static_cast<double>(s.moe_layers()), dense = l - moe;
  p.experts = moe * expert * s.experts;
  p.mlp = dense * expert + p.experts;
  p.router = moe * d * s.experts;
  p.norms = (2 * l + 1) * norm_params(s);
  p.embedding = s.vocab * d;
  p.unembedding = s.tied_embeddings ? 0 : s.vocab * d;
  p.positions = s.learned_positions * d;
  p.total = p.attention + p.mlp + p.router + p.norms + p.embedding + p.unembedding + p.positions;
  p.active = p.total - moe * expert * (s.experts - s.top_k);
  // The embedding lookup is a gather, not a matmul; the output projection is one (tied or not).
  p.matmul = p.attention + dense * expert + moe * expert * s.top_k + p.router + s.vocab * d;
  return p;
}

TransformerShape shape_for_params(double params, TransformerShape s) {
  // count_params is linear in L over whole groups of moe_every layers.
  const int64_t group = std::max<int64_t>(1, s.moe_every);
  s.layers = group;
  const double one = count_params(s).total;
  s.layers = 2 * group;
  const double per_layer = (count_params(s).total - one) / group, fixed = one - group * per_layer;
  const int64_t layers = std::llround((params - fixed) / per_layer / group) * group;
  if (!(params > 0) || layers < group) {
    throw UserError("a model of " + format_number(params) + " params does not reach " + std::to_string(group) +
                    " layer(s) of " + format_number(per_layer) + " params plus " + format_number(fixed) +
                    " of embeddings at D=" + std::to_string(s.d_model) + "; give a smaller --d-model (or more params)");
  }
  s.layers = layers;
  return s;
}

double attention_flops_per_token(const TransformerShape& s, int64_t context) {
  return 4.0 * context * s.heads * s.head_dim * s.layers;
}

ElementwiseTraffic elementwise_elements_per_token_layer(const TransformerShape& s, int64_t context) {
  constexpr double kForwardAndBackward = 3.0;
  const double d = static_cast<double>(s.d_model);
  return {.replicated = kForwardAndBackward * 18.0 * d,
          .divided = kForwardAndBackward * (4.0 * s.heads * static_cast<double>(context) +
                                            (s.gated_mlp ? 3.0 : 2.0) * static_cast<double>(s.d_ff) *
                                                (s.experts > 0 ? s.top_k : 1))};
}

double forward_flops_per_token(const TransformerShape& s, int64_t context) {
  return 2 * count_params(s).matmul + attention_flops_per_token(s, context);
}

// Backward costs twice the forward. Remat adds what the policy recomputes in backward:
// full: the whole forward; save-matmul: the attention core (scores and values are not a
// linear layer's output); save-mlp-matmul: the attention block (projections and core).
double train_flops_per_token(const TransformerShape& s, nn::Remat remat) {
  const double forward = forward_flops_per_token(s, s.context);
  const double core = attention_flops_per_token(s, s.context);
  switch (remat) {
    case nn::Remat::None: return 3 * forward;
    case nn::Remat::Full: return 4 * forward;
    case nn::Remat::SaveMatmulOutputs: return 3 * forward + core;
    case nn::Remat::SaveMlpMatmulOutputs: return 3 * forward + core + 2 * count_params(s).attention;
  }
  return 0;
}

double train_flops(double params, double tokens) { return 6 * params * tokens; }

double attention_crossover_context(const TransformerShape& s) {
  const double projections = 2.0 * s.d_model * (s.heads + s.kv_heads) * s.head_dim;  // per layer
  return projections / (2.0 * s.heads * s.head_dim);
}

double attention_matmul_crossover_context(const TransformerShape& s) {
  const double layer_matmul = (count_params(s).matmul - static_cast<double>(s.vocab) * s.d_model) / s.layers;
  return layer_matmul / (2.0 * s.heads * s.head_dim);
}

double kv_bytes_per_token(const TransformerShape& s, DType kv) {
  return 2.0 * s.layers * s.kv_heads * s.head_dim * bytes_of(kv);
}

double saved_activations_per_token_layer(const TransformerShape& s, nn::Remat remat) {
  const double d = s.d_model, f = s.d_ff * (s.experts > 0 ? s.top_k : 1);
  const double q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  switch (remat) {
    case nn::Remat::None: return 4 * d + 2 * q + 2 * kv + (s.gated_mlp ? 4 : 2) * f;
    case nn::Remat::Full: return d;
    case nn::Remat::SaveMatmulOutputs: return d + (q + 2 * kv) + d + (s.gated_mlp ? 2 : 1) * f + d;
    case nn::Remat::SaveMlpMatmulOutputs: return d + (s.gated_mlp ? 2 : 1) * f;
  }
  return 0;
}

double activation_bytes(double tokens, int64_t layers, double width, DType dtype) {
  return tokens * layers * width * bytes_of(dtype);
}

TrainingPrecision fp32_training() {
  return {DType::kFp32, DType::kFp32, 8, DType::kFp32, DType::kFp32, {DType::kFp32, DType::kFp32}};
}

TrainingMemory training_memory(const TransformerShape& s, double tokens, nn::Remat remat,
                               const TrainingPrecision& precision) {
  const double params = count_params(s).total;
  TrainingMemory m;
  m.params = params * bytes_of(precision.params);
  m.grads = params * bytes_of(precision.grads);
  m.optimizer = params * precision.optimizer_bytes;
  m.activations = activation_bytes(tokens, s.layers, saved_activations_per_token_layer(s, remat),
                                   precision.activations);
  return m;
}

}  // namespace shardlab::cost
