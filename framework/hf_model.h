// Hugging Face model directories <-> shardlab parameters (docs/models.md).
//
// A Hugging Face model directory holds config.json (transformers' own field names) and
// model.safetensors, or past a size limit its shards and their index
// (framework/safetensors_dir.h). GPT models map to GPT2LMHeadModel, LLaMA models to
// LlamaForCausalLM; what changes on the way (docs/checkpoint_format.md, "Parameter names and layouts"):
// - GPT-2's Conv1D weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) are [in, out]:
//   transposed. c_attn's columns are q, k, v side by side, so its transpose is wqkv.
//   The head is tied to transformer.wte.weight; no lm_head.weight is written, and one
//   that is read must equal the embedding.
// - LLaMA's q_proj, k_proj, v_proj are stacked into wqkv; q and k rows are permuted within
//   each head between HF's half-rotation RoPE (dim i with i + H/2) and shardlab's
//   interleaved pairs (2i with 2i + 1): shardlab row 2i = HF row i, 2i + 1 = HF row i + H/2.
// The names and shapes come from the model itself (nn::Transformer's named_parameters), so
// every parameter is mapped or the conversion fails; transposes and permutations move
// values without arithmetic, so export then import is bit-exact. Mixture-of-experts models
// have no mapping (UserError).
//
//   hf::export_model(config, [&](const std::string& name, const Shape& shape) {...}, "out/hf");
//   nn::ModelConfig c = hf::read_config("out/hf");
//   hf::import_model("out/hf", c, [&](const std::string& name, const Shape& shape, std::span<const float> v) {...});
//   hf::import_checkpoint("out/hf", c, "init.h5");
#pragma once

#include <cstdint>
#include <string>

#include "framework/model_weights.h"
#include "framework/nn/config.h"
#include "framework/safetensors_dir.h"

namespace shardlab::hf {

using shardlab::ParamSink;
using shardlab::ParamSource;

// Writes dir/config.json and the weights (fp32), creating dir: dir/model.safetensors, or
// past max_shard_bytes shards and model.safetensors.index.json (framework/safetensors_dir.h).
void export_model(const nn::ModelConfig& config, const ParamSource& params, const std::string& dir,
                  int64_t max_shard_bytes = kDefaultMaxShardBytes);

// The model dir/config.json describes; UserError naming the file and the field that is
// missing, of the wrong type, or a choice shardlab's models do not make.
nn::ModelConfig read_config(const std::string& dir);
// Every parameter of `config`'s model from dir's weights -- model.safetensors or the shards
// of model.safetensors.index.json; F32, BF16 or F16 -- in shardlab's names and layouts;
// UserError naming a missing or misshapen tensor, or a missing shard.
void import_model(const std::string& dir, const nn::ModelConfig& config, const ParamSink& params);

// import_model into a shardlab checkpoint at `path` (write_weights_checkpoint).
void import_checkpoint(const std::string& dir, const nn::ModelConfig& config, const std::string& path);

}  // namespace shardlab::hf
