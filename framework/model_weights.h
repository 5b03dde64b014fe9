// A model's weights as named tensors, for the converters to and from other frameworks'
// files (framework/hf_model.h: Hugging Face directories; framework/llmc_model.h: llm.c's
// GPT-2 model file).
//
// A converter reads shardlab parameters through a ParamSource (from a checkpoint, say) and
// hands what it imports to a ParamSink, one whole parameter at a time, in shardlab's
// names and global shapes. model_parameters lists what a model has, nothing allocated, so
// a converter maps every parameter or fails. write_weights_checkpoint makes a shardlab
// checkpoint of an import: params/<name> and the model's fields as its "config"
// attributes -- enough for generate --ckpt and train_gpt --init-from, not for --resume
// (no optimizer state).
//
//   for (const auto& [name, shape] : model_parameters(config)) {...}
//   write_weights_checkpoint("init.h5", config, [&](const ParamSink& sink) { hf::import_model(dir, config, sink); });
#pragma once

#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "framework/nn/config.h"
#include "framework/tensor.h"

namespace shardlab {

// Gives the values of shardlab parameter `name`, of global shape `shape`.
using ParamSource = std::function<std::vector<float>(const std::string& name, const Shape& shape)>;
// Takes the values of shardlab parameter `name`.
using ParamSink = std::function<void(const std::string& name, const Shape& shape, std::span<const float> values)>;

// Every parameter of `config`'s model, in the model's order, with its global shape.
std::vector<std::pair<std::string, Shape>> model_parameters(const nn::ModelConfig& config);

// A checkpoint at `path` (written atomically) of what `fill` gives its sink, with
// `config`'s fields; commit() checks that every tensor written is complete.
void write_weights_checkpoint(const std::string& path, const nn::ModelConfig& config,
                              const std::function<void(const ParamSink&)>& fill);

}  // namespace shardlab
