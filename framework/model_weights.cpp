#include "framework/model_weights.h"

#include "framework/checkpoint.h"
#include "framework/nn/transformer.h"

namespace shardlab {

std::vector<std::pair<std::string, Shape>> model_parameters(const nn::ModelConfig& config) {
  nn::DeferParameters defer;
  nn::Transformer model(config);
  std::vector<std::pair<std::string, Shape>> out;
  for (auto& [name, p] : model.named_parameters()) out.emplace_back(name, p.shape());
  return out;
}

void write_weights_checkpoint(const std::string& path, const nn::ModelConfig& c,
                              const std::function<void(const ParamSink&)>& fill) {
  CheckpointWriter writer(path);
  fill([&](const std::string& name, const Shape& shape, std::span<const float> values) {
    writer.write("params/" + name, shape, values);
  });
  writer.set_config({{"arch", nn::arch_name(c.arch)}, {"vocab", c.vocab}, {"context", c.context},
                     {"d_model", c.d_model}, {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
                     {"n_kv_heads", c.n_kv_heads}, {"d_ff", c.d_ff}, {"rope_theta", static_cast<double>(c.rope_theta)},
                     {"norm_eps", static_cast<double>(c.norm_eps)}, {"experts", c.experts}});
  writer.commit();
}

}  // namespace shardlab
