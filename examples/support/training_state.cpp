#include "examples/support/training_state.h"

#include <cstdio>
#include <filesystem>

#include "framework/error.h"

namespace shardlab::cli {

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt_%06lld.h5", static_cast<long long>(step));
  return (std::filesystem::path(dir) / name).string();
}

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer* opt, const TrainState& state,
                     const RunConfig& run) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  CheckpointWriter w(path);
  for (auto& [name, p] : model.named_parameters()) w.write("params/" + name, p.shape(), p.span());
  if (opt) {
    for (const auto& [name, t] : opt->state_tensors()) w.write("optim/" + name, t.shape(), t.span());
    w.set_attribute("optimizer_step", opt->step_count());
  }
  w.set_attribute("step", state.step);
  w.set_attribute("data_position", state.data_position);
  w.set_attribute("seed", static_cast<int64_t>(run.seed));
  w.set_config(run.to_attributes());
  w.commit();
}

TrainState load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* opt,
                           const nn::ModelConfig& expected) {
  CheckpointReader r(path);
  const nn::ModelConfig stored = model_config_from(r.config(), path);
  const bool same = stored.arch == expected.arch && stored.vocab == expected.vocab &&
                    stored.context == expected.context && stored.d_model == expected.d_model &&
                    stored.n_layers == expected.n_layers && stored.n_heads == expected.n_heads &&
                    stored.n_kv_heads == expected.n_kv_heads && stored.d_ff == expected.d_ff;
  if (!same) {
    throw UserError("checkpoint " + path + " holds a different model (" + stored.describe() + ") than this run (" +
                    expected.describe() + "); pass the model flags it was trained with");
  }
  for (auto& [name, p] : model.named_parameters()) r.read("params/" + name, p.shape(), p.span());
  if (opt) {
    for (const auto& [name, t] : opt->state_tensors()) {
      Tensor dst = t;
      r.read("optim/" + name, dst.shape(), dst.span());
    }
    opt->set_step_count(r.int_attribute("optimizer_step"));
  }
  return {r.int_attribute("step"), r.int_attribute("data_position")};
}

}  // namespace shardlab::cli
