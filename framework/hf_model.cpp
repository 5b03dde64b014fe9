#include "framework/hf_model.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "framework/error.h"
#include "framework/safetensors_dir.h"

namespace shardlab::hf {
namespace {

using nlohmann::json;

// How one shardlab parameter becomes Hugging Face tensors.
enum class Move {
  kCopy,       // same values, same shape
  kTranspose,  // GPT-2 Conv1D: [out, in] <-> [in, out]
  kSplitQkv,   // LLaMA: wqkv <-> q_proj, k_proj, v_proj, q and k rows permuted per head
};
struct Mapping {
  Move move = Move::kCopy;
  std::vector<std::string> hf;  // one name, or q, k, v for kSplitQkv
};

Mapping map_gpt(const std::string& name, const std::string& root) {
  static const std::map<std::string, Mapping> block = {
      {"norm1.weight", {Move::kCopy, {"ln_1.weight"}}},
      {"norm1.bias", {Move::kCopy, {"ln_1.bias"}}},
      {"attn.wqkv.weight", {Move::kTranspose, {"attn.c_attn.weight"}}},
      {"attn.wqkv.bias", {Move::kCopy, {"attn.c_attn.bias"}}},
      {"attn.wo.weight", {Move::kTranspose, {"attn.c_proj.weight"}}},
      {"attn.wo.bias", {Move::kCopy, {"attn.c_proj.bias"}}},
      {"norm2.weight", {Move::kCopy, {"ln_2.weight"}}},
      {"norm2.bias", {Move::kCopy, {"ln_2.bias"}}},
      {"mlp.fc.weight", {Move::kTranspose, {"mlp.c_fc.weight"}}},
      {"mlp.fc.bias", {Move::kCopy, {"mlp.c_fc.bias"}}},
      {"mlp.fc2.weight", {Move::kTranspose, {"mlp.c_proj.weight"}}},
      {"mlp.fc2.bias", {Move::kCopy, {"mlp.c_proj.bias"}}},
  };
  static const std::map<std::string, std::string> top = {
      {"wte.weight", "wte.weight"}, {"wpe.weight", "wpe.weight"},
      {"norm_f.weight", "ln_f.weight"}, {"norm_f.bias", "ln_f.bias"}};
  if (const auto it = top.find(name); it != top.end()) return {Move::kCopy, {root + it->second}};
  const size_t dot = name.find('.', 7);  // "blocks.<l>.<rest>"
  if (name.rfind("blocks.", 0) == 0 && dot != std::string::npos) {
    if (const auto it = block.find(name.substr(dot + 1)); it != block.end()) {
      return {it->second.move, {root + "h." + name.substr(7, dot - 7) + "." + it->second.hf[0]}};
    }
  }
  throw UserError("parameter '" + name + "' has no GPT2LMHeadModel counterpart");
}

Mapping map_llama(const std::string& name) {
  static const std::map<std::string, std::string> block = {
      {"norm1.weight", "input_layernorm.weight"},
      {"attn.wo.weight", "self_attn.o_proj.weight"},
      {"norm2.weight", "post_attention_layernorm.weight"},
      {"mlp.gate.weight", "mlp.gate_proj.weight"},
      {"mlp.up.weight", "mlp.up_proj.weight"},
      {"mlp.down.weight", "mlp.down_proj.weight"},
  };
  static const std::map<std::string, std::string> top = {
      {"wte.weight", "model.embed_tokens.weight"}, {"norm_f.weight", "model.norm.weight"},
      {"lm_head.weight", "lm_head.weight"}};
  if (const auto it = top.find(name); it != top.end()) return {Move::kCopy, {it->second}};
  const size_t dot = name.find('.', 7);
  if (name.rfind("blocks.", 0) == 0 && dot != std::string::npos) {
    const std::string prefix = "model.layers." + name.substr(7, dot - 7) + ".";
    const std::string rest = name.substr(dot + 1);
    if (rest == "attn.wqkv.weight") {
      return {Move::kSplitQkv,
              {prefix + "self_attn.q_proj.weight", prefix + "self_attn.k_proj.weight", prefix + "self_attn.v_proj.weight"}};
    }
    if (const auto it = block.find(rest); it != block.end()) return {Move::kCopy, {prefix + it->second}};
  }
  throw UserError("parameter '" + name + "' has no LlamaForCausalLM counterpart");
}

Mapping map_param(const nn::ModelConfig& c, const std::string& name, const std::string& gpt_root) {
  return c.arch == nn::Arch::Gpt ? map_gpt(name, gpt_root) : map_llama(name);
}

std::vector<float> transpose(std::span<const float> v, int64_t rows, int64_t cols) {
  std::vector<float> out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = v[r * cols + c];
  }
  return out;
}

// Rows of `heads` heads of H rows each, D columns: shardlab's interleaved RoPE pairs
// (2i, 2i + 1) <-> HF's halves (i, i + H/2), within each head.
std::vector<float> permute_rope(std::span<const float> v, int64_t heads, int64_t H, int64_t D, bool to_hf) {
  std::vector<float> out(v.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < H / 2; ++i) {
      const int64_t pairs[2][2] = {{h * H + 2 * i, h * H + i}, {h * H + 2 * i + 1, h * H + i + H / 2}};
      for (const auto& [ours, theirs] : pairs) {
        const int64_t from = to_hf ? ours : theirs, to = to_hf ? theirs : ours;
        std::memcpy(&out[to * D], &v[from * D], D * sizeof(float));
      }
    }
  }
  return out;
}

// The shardlab parameters of `config`'s model, refusing what has no mapping.
std::vector<std::pair<std::string, Shape>> mapped_parameters(const nn::ModelConfig& config) {
  if (config.experts > 0) {
    throw UserError("mixture-of-experts models have no Hugging Face mapping in shardlab; convert a dense model");
  }
  return model_parameters(config);
}

// A float as its shortest decimal (1e-05, not 9.99999974737875e-06) read as a double.
double decimal(float value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::stod(std::string(text, end));
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw UserError("cannot open '" + path + "'; a Hugging Face model directory holds config.json and " +
                    kSafetensorsFile);
  }
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw UserError("'" + path + "' is not valid JSON (" + e.what() + ")");
  }
}

}  // namespace

void export_model(const nn::ModelConfig& config, const ParamSource& params, const std::string& dir,
                  int64_t max_shard_bytes) {
  const bool gpt = config.arch == nn::Arch::Gpt;
  const int64_t H = config.head_dim(), D = config.d_model;
  std::vector<std::pair<std::string, Shape>> names;
  std::vector<std::vector<float>> values;  // kept alive until the file is written
  for (const auto& [name, shape] : mapped_parameters(config)) {
    const Mapping m = map_param(config, name, "transformer.");
    std::vector<float> v = params(name, shape);
    if (m.move == Move::kCopy) {
      names.emplace_back(m.hf[0], shape);
      values.push_back(std::move(v));
    } else if (m.move == Move::kTranspose) {
      names.emplace_back(m.hf[0], Shape{shape[1], shape[0]});
      values.push_back(transpose(v, shape[0], shape[1]));
    } else {
      const int64_t q = config.n_heads * H * D, k = config.n_kv_heads * H * D;
      names.emplace_back(m.hf[0], Shape{config.n_heads * H, D});
      values.push_back(permute_rope(std::span(v).subspan(0, q), config.n_heads, H, D, true));
      names.emplace_back(m.hf[1], Shape{config.n_kv_heads * H, D});
      values.push_back(permute_rope(std::span(v).subspan(q, k), config.n_kv_heads, H, D, true));
      names.emplace_back(m.hf[2], Shape{config.n_kv_heads * H, D});
      values.emplace_back(v.begin() + q + k, v.end());
    }
  }
  std::vector<SafetensorsEntry> entries;
  for (size_t i = 0; i < names.size(); ++i) entries.push_back({names[i].first, names[i].second, values[i]});

  json c;
  if (gpt) {
    c = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", config.vocab},
         {"n_positions", config.context}, {"n_ctx", config.context}, {"n_embd", D},
         {"n_layer", config.n_layers}, {"n_head", config.n_heads}, {"n_inner", config.d_ff},
         {"activation_function", "gelu_new"}, {"layer_norm_epsilon", decimal(config.norm_eps)},
         {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"tie_word_embeddings", true}};
  } else {
    c = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", config.vocab},
         {"max_position_embeddings", config.context}, {"hidden_size", D},
         {"intermediate_size", config.d_ff}, {"num_hidden_layers", config.n_layers},
         {"num_attention_heads", config.n_heads}, {"num_key_value_heads", config.n_kv_heads}, {"head_dim", H},
         {"hidden_act", "silu"}, {"rms_norm_eps", decimal(config.norm_eps)},
         {"rope_theta", decimal(config.rope_theta)}, {"rope_scaling", nullptr}, {"attention_bias", false},
         {"mlp_bias", false}, {"tie_word_embeddings", false}};
  }
  c["torch_dtype"] = "float32";
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw UserError("cannot create directory '" + dir + "' (" + error.message() + ")");
  write_safetensors_dir(dir, entries, max_shard_bytes);
  std::ofstream out(dir + "/config.json");
  out << c.dump(2) << "\n";
  if (!out.flush()) throw UserError("cannot write '" + dir + "/config.json'");
}

nn::ModelConfig read_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  const json j = load_json(path);
  const auto fail = [&](const std::string& what) -> UserError { return UserError("'" + path + "': " + what); };
  const auto has = [&](const char* key) { return j.is_object() && j.contains(key) && !j.at(key).is_null(); };
  const auto integer = [&](const char* key) {
    if (!has(key)) throw fail("field '" + std::string(key) + "' is missing");
    if (!j.at(key).is_number_integer()) throw fail("field '" + std::string(key) + "' is " + j.at(key).dump() + ", not an integer");
    return j.at(key).get<int64_t>();
  };
  const auto real = [&](const char* key, double fallback) {
    if (!has(key)) return static_cast<float>(fallback);
    if (!j.at(key).is_number()) throw fail("field '" + std::string(key) + "' is " + j.at(key).dump() + ", not a number");
    return static_cast<float>(j.at(key).get<double>());
  };
  const auto text = [&](const char* key, const std::string& fallback) {
    if (!has(key)) return fallback;
    if (!j.at(key).is_string()) throw fail("field '" + std::string(key) + "' is " + j.at(key).dump() + ", not a string");
    return j.at(key).get<std::string>();
  };
  const auto boolean = [&](const char* key, bool fallback) {
    if (!has(key)) return fallback;
    if (!j.at(key).is_boolean()) throw fail("field '" + std::string(key) + "' is " + j.at(key).dump() + ", not true or false");
    return j.at(key).get<bool>();
  };
  const auto require = [&](const char* key, bool ok, const std::string& why) {
    if (!ok) throw fail("field '" + std::string(key) + "' is " + (has(key) ? j.at(key).dump() : "missing") + "; " + why);
  };
  const std::string type = text("model_type", "");
  nn::ModelConfig c;
  if (type == "gpt2") {
    c.arch = nn::Arch::Gpt;
    c.vocab = integer("vocab_size");
    c.context = integer("n_positions");
    c.d_model = integer("n_embd");
    c.n_layers = integer("n_layer");
    c.n_heads = c.n_kv_heads = integer("n_head");
    c.d_ff = has("n_inner") ? integer("n_inner") : 4 * c.d_model;
    c.norm_eps = real("layer_norm_epsilon", 1e-5);
    const std::string act = text("activation_function", "gelu_new");
    require("activation_function", act == "gelu_new" || act == "gelu_pytorch_tanh",
            "shardlab's GPT uses GELU's tanh form (gelu_new)");
    require("scale_attn_by_inverse_layer_idx", !boolean("scale_attn_by_inverse_layer_idx", false),
            "shardlab scales attention by 1/sqrt(head dim) only");
    require("tie_word_embeddings", boolean("tie_word_embeddings", true),
            "shardlab's GPT ties its head to the embedding");
  } else if (type == "llama") {
    c.arch = nn::Arch::Llama;
    c.vocab = integer("vocab_size");
    c.context = integer("max_position_embeddings");
    c.d_model = integer("hidden_size");
    c.n_layers = integer("num_hidden_layers");
    c.n_heads = integer("num_attention_heads");
    c.n_kv_heads = has("num_key_value_heads") ? integer("num_key_value_heads") : c.n_heads;
    c.d_ff = integer("intermediate_size");
    c.norm_eps = real("rms_norm_eps", 1e-6);
    c.rope_theta = real("rope_theta", 10000.0);
    boolean("tie_word_embeddings", false);  // checked here, used by import_model
    require("head_dim", !has("head_dim") || integer("head_dim") == c.d_model / c.n_heads,
            "shardlab's head dim is hidden_size / num_attention_heads");
    require("hidden_act", text("hidden_act", "silu") == "silu", "shardlab's LLaMA MLP is SwiGLU (silu)");
    require("rope_scaling", !has("rope_scaling"), "shardlab's RoPE has no scaling");
    require("attention_bias", !boolean("attention_bias", false),
            "shardlab's LLaMA has no attention biases");
    require("mlp_bias", !boolean("mlp_bias", false), "shardlab's LLaMA has no MLP biases");
  } else {
    throw fail("field 'model_type' is " + (has("model_type") ? j.at("model_type").dump() : std::string("missing")) +
               "; shardlab converts \"gpt2\" (GPT2LMHeadModel) and \"llama\" (LlamaForCausalLM)");
  }
  try {
    c.validate();
  } catch (const UserError& e) {
    throw fail(std::string("not a model shardlab can build: ") + e.what());
  }
  return c;
}

void import_model(const std::string& dir, const nn::ModelConfig& config, const ParamSink& params) {
  const SafetensorsDir weights(dir);
  const int64_t H = config.head_dim(), D = config.d_model;
  // GPT2LMHeadModel saves "transformer.wte.weight"; the hub's gpt2 file (saved from GPT2Model) "wte.weight".
  const std::string gpt_root = weights.has("transformer.wte.weight") || !weights.has("wte.weight") ? "transformer." : "";
  const json j = load_json(dir + "/config.json");
  const bool tied = j.is_object() && j.contains("tie_word_embeddings") && j.at("tie_word_embeddings").is_boolean()
                        ? j.at("tie_word_embeddings").get<bool>()
                        : config.arch == nn::Arch::Gpt;
  for (const auto& [name, shape] : mapped_parameters(config)) {
    const Mapping m = map_param(config, name, gpt_root);
    if (m.move == Move::kCopy) {
      const bool from_embedding = name == "lm_head.weight" && tied && !weights.has(m.hf[0]);
      params(name, shape, weights.read(from_embedding ? "model.embed_tokens.weight" : m.hf[0], shape));
    } else if (m.move == Move::kTranspose) {
      params(name, shape, transpose(weights.read(m.hf[0], {shape[1], shape[0]}), shape[1], shape[0]));
    } else {
      std::vector<float> v = permute_rope(weights.read(m.hf[0], {config.n_heads * H, D}), config.n_heads, H, D, false);
      const std::vector<float> k =
          permute_rope(weights.read(m.hf[1], {config.n_kv_heads * H, D}), config.n_kv_heads, H, D, false);
      const std::vector<float> vv = weights.read(m.hf[2], {config.n_kv_heads * H, D});
      v.insert(v.end(), k.begin(), k.end());
      v.insert(v.end(), vv.begin(), vv.end());
      params(name, shape, v);
    }
  }
  // GPT-2's head is the embedding: a stored lm_head.weight must be that same matrix.
  if (config.arch == nn::Arch::Gpt && weights.has("lm_head.weight")) {
    const Shape shape{config.vocab, D};
    if (weights.read("lm_head.weight", shape) != weights.read(gpt_root + "wte.weight", shape)) {
      throw UserError("safetensors file '" + weights.file_of("lm_head.weight") +
                      "': tensor 'lm_head.weight' differs from the embedding, but GPT2LMHeadModel ties them");
    }
  }
}

void import_checkpoint(const std::string& dir, const nn::ModelConfig& c, const std::string& path) {
  write_weights_checkpoint(path, c, [&](const ParamSink& sink) { import_model(dir, c, sink); });
}

}  // namespace shardlab::hf
