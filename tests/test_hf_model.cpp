// Hugging Face model directories (framework/hf_model.h): export then import is bit-exact for
// GPT-2 and for LLaMA with GQA; the exported tensors follow transformers' conventions
// (Conv1D [in, out], q/k/v stacking, the RoPE half-rotation permutation, the tied head);
// a config.json or weights file that does not fit is a UserError naming the field or tensor.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "framework/hf_model.h"
#include "framework/safetensors_dir.h"
#include "tests/temp_dir.h"
#include "tests/user_error.h"

using namespace shardlab;
using shardlab::testing::user_error_of;

namespace {

using Params = std::map<std::string, std::pair<Shape, std::vector<float>>>;

nn::ModelConfig tiny(nn::Arch arch) {
  nn::ModelConfig c = nn::ModelConfig::preset(arch == nn::Arch::Gpt ? "gpt-tiny" : "llama-tiny");
  c.vocab = 32;
  c.context = 8;
  return c;
}

// Every parameter filled with distinct values (its element index and a per-tensor offset).
hf::ParamSource distinct_values(Params& made) {
  return [&made](const std::string& name, const Shape& shape) {
    std::vector<float> v(static_cast<size_t>(numel_of(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(made.size() * 10000 + i) * 0.001f + 0.1f;
    made[name] = {shape, v};
    return v;
  };
}

Params import_all(const std::string& dir, const nn::ModelConfig& config) {
  Params got;
  hf::import_model(dir, config, [&](const std::string& name, const Shape& shape, std::span<const float> v) {
    got[name] = {shape, std::vector<float>(v.begin(), v.end())};
  });
  return got;
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); }

}  // namespace

TEST_CASE("GPT-2: export then import is bit-exact, in GPT2LMHeadModel's names and Conv1D layout") {
  TempDir dir;
  const nn::ModelConfig c = tiny(nn::Arch::Gpt);
  Params made;
  hf::export_model(c, distinct_values(made), dir.file("hf"));
  const nlohmann::json config = read_json(dir.file("hf/config.json"));
  CHECK(config["model_type"] == "gpt2");
  CHECK(config["n_embd"] == c.d_model);
  CHECK(config["n_inner"] == c.d_ff);
  CHECK(config["layer_norm_epsilon"] == 1e-5);
  const nn::ModelConfig back = hf::read_config(dir.file("hf"));
  CHECK(back.describe() == c.describe());
  CHECK(import_all(dir.file("hf"), back) == made);

  const SafetensorsFile f(dir.file("hf/model.safetensors"));
  CHECK_FALSE(f.has("lm_head.weight"));  // tied to transformer.wte.weight
  const int64_t D = c.d_model;
  const auto& [wqkv_shape, wqkv] = made.at("blocks.1.attn.wqkv.weight");
  CHECK(wqkv_shape == Shape{3 * D, D});
  const std::vector<float> c_attn = f.read("transformer.h.1.attn.c_attn.weight", {D, 3 * D});
  for (int64_t out = 0; out < 3 * D; ++out) {
    for (int64_t in = 0; in < D; ++in) REQUIRE(c_attn[in * 3 * D + out] == wqkv[out * D + in]);
  }
  CHECK(f.read("transformer.h.0.mlp.c_fc.weight", {D, c.d_ff}).size() == static_cast<size_t>(D * c.d_ff));
  CHECK(f.has("transformer.ln_f.bias"));
  CHECK(f.has("transformer.wpe.weight"));
}

TEST_CASE("LLaMA with GQA: export then import is bit-exact; q and k rows take HF's half-rotation order") {
  TempDir dir;
  nn::ModelConfig c = tiny(nn::Arch::Llama);
  c.n_heads = 4;
  c.n_kv_heads = 2;
  Params made;
  hf::export_model(c, distinct_values(made), dir.file("hf"));
  const nlohmann::json config = read_json(dir.file("hf/config.json"));
  CHECK(config["num_key_value_heads"] == 2);
  CHECK(config["rope_theta"] == 500000.0);
  const nn::ModelConfig back = hf::read_config(dir.file("hf"));
  CHECK(back.describe() == c.describe());
  CHECK(back.rope_theta == c.rope_theta);
  CHECK(import_all(dir.file("hf"), back) == made);

  const SafetensorsFile f(dir.file("hf/model.safetensors"));
  const int64_t D = c.d_model, H = c.head_dim();
  const std::vector<float>& wqkv = made.at("blocks.0.attn.wqkv.weight").second;
  const std::vector<float> q = f.read("model.layers.0.self_attn.q_proj.weight", {4 * H, D});
  const std::vector<float> k = f.read("model.layers.0.self_attn.k_proj.weight", {2 * H, D});
  const std::vector<float> v = f.read("model.layers.0.self_attn.v_proj.weight", {2 * H, D});
  const auto row = [&](const std::vector<float>& m, int64_t r) { return std::vector<float>(&m[r * D], &m[r * D + D]); };
  // Head 1 of q: HF row i = shardlab row 2i, HF row i + H/2 = shardlab row 2i + 1.
  for (int64_t i = 0; i < H / 2; ++i) {
    CHECK(row(q, H + i) == row(wqkv, H + 2 * i));
    CHECK(row(q, H + i + H / 2) == row(wqkv, H + 2 * i + 1));
    CHECK(row(k, H + i) == row(wqkv, 4 * H + H + 2 * i));
  }
  CHECK(row(v, H + 1) == row(wqkv, 6 * H + H + 1));  // v is not permuted
  CHECK(f.has("lm_head.weight"));
  CHECK(f.has("model.layers.1.mlp.gate_proj.weight"));
}

TEST_CASE("a sharded export (past max_shard_bytes) imports bit-exact, for GPT-2 and LLaMA") {
  for (const nn::Arch arch : {nn::Arch::Gpt, nn::Arch::Llama}) {
    TempDir dir;
    const nn::ModelConfig c = tiny(arch);
    Params made;
    hf::export_model(c, distinct_values(made), dir.file("hf"), 4096);  // shards of at most 4 KB
    const SafetensorsDir weights(dir.file("hf"));
    CHECK(weights.sharded());
    CHECK(weights.file_count() > 2);
    CHECK(import_all(dir.file("hf"), hf::read_config(dir.file("hf"))) == made);
    // A shard gone: the import names it.
    char second[64];
    std::snprintf(second, sizeof second, "model-00002-of-%05lld.safetensors",
                  static_cast<long long>(weights.file_count()));
    REQUIRE(std::filesystem::remove(dir.file("hf/") + second));
    CHECK(user_error_of([&] { import_all(dir.file("hf"), c); }).find(std::string("shard '") + second + "'") !=
          std::string::npos);
  }
}

TEST_CASE("a Hugging Face directory that does not fit is a UserError naming the field or tensor") {
  TempDir dir;
  const nn::ModelConfig c = tiny(nn::Arch::Gpt);
  Params made;
  hf::export_model(c, distinct_values(made), dir.file("hf"));
  const std::string config_path = dir.file("hf/config.json");
  const nlohmann::json good = read_json(config_path);
  const auto with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json j = good;
    if (value.is_discarded()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
    std::ofstream(config_path) << j.dump();
    return user_error_of([&] { hf::read_config(dir.file("hf")); });
  };
  CHECK(with("n_embd", nlohmann::json::value_t::discarded).find("field 'n_embd' is missing") != std::string::npos);
  CHECK(with("n_layer", "two").find("field 'n_layer' is \"two\", not an integer") != std::string::npos);
  CHECK(with("model_type", "bert").find("field 'model_type' is \"bert\"") != std::string::npos);
  CHECK(with("activation_function", "relu").find("field 'activation_function'") != std::string::npos);
  CHECK(with("n_head", 5).find("not a model shardlab can build") != std::string::npos);

  // A config that disagrees with the tensors: the misshapen tensor is named.
  std::ofstream(config_path) << good.dump();
  nn::ModelConfig wider = c;
  wider.d_ff = 2 * c.d_ff;
  CHECK(user_error_of([&] { import_all(dir.file("hf"), wider); })
            .find("tensor 'transformer.h.0.mlp.c_fc.weight' has shape [16, 32] but the model expects [16, 64]") !=
        std::string::npos);

  // A missing tensor, and a GPT-2 head that is not the embedding.
  const SafetensorsFile f(dir.file("hf/model.safetensors"));
  std::vector<std::vector<float>> keep;
  std::vector<SafetensorsEntry> entries;
  for (const std::string& name : f.names()) {
    if (name == "transformer.h.1.ln_2.bias") continue;
    keep.push_back(f.read(name, f.shape(name)));
    entries.push_back({name, f.shape(name), keep.back()});
  }
  std::vector<float> head(static_cast<size_t>(c.vocab * c.d_model), 0.5f);
  write_safetensors(dir.file("hf/model.safetensors"), entries);
  CHECK(user_error_of([&] { import_all(dir.file("hf"), c); }).find("no tensor 'transformer.h.1.ln_2.bias'") !=
        std::string::npos);
  entries.push_back({"transformer.h.1.ln_2.bias", {c.d_model}, made.at("blocks.1.norm2.bias").second});
  entries.push_back({"lm_head.weight", {c.vocab, c.d_model}, head});
  write_safetensors(dir.file("hf/model.safetensors"), entries);
  CHECK(user_error_of([&] { import_all(dir.file("hf"), c); }).find("'lm_head.weight' differs from the embedding") !=
        std::string::npos);
}
