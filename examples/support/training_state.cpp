#include "examples/support/training_state.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "framework/error.h"
#include "parallel/data_parallel/sharded_io.h"

namespace shardlab::cli {
namespace {

// Opens a checkpoint and checks it holds the model this run builds.
std::unique_ptr<CheckpointReader> open_for(const std::string& path, const nn::ModelConfig& expected) {
  auto r = std::make_unique<CheckpointReader>(path);
  const nn::ModelConfig stored = model_config_from(r->config(), path);
  const bool same = stored.arch == expected.arch && stored.vocab == expected.vocab &&
                    stored.context == expected.context && stored.d_model == expected.d_model &&
                    stored.n_layers == expected.n_layers && stored.n_heads == expected.n_heads &&
                    stored.n_kv_heads == expected.n_kv_heads && stored.d_ff == expected.d_ff;
  if (!same) {
    throw UserError("checkpoint " + path + " holds a different model (" + stored.describe() + ") than this run (" +
                    expected.describe() + "); pass the model flags it was trained with");
  }
  return r;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt_%06lld.h5", static_cast<long long>(step));
  return (std::filesystem::path(dir) / name).string();
}

void save_checkpoint(const std::string& path, const parallel::Mesh& mesh, const parallel::ParallelModel& model,
                     const TrainState& state, const RunConfig& run) {
  if (mesh.rank() == 0) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
  }
  parallel::save_checkpoint(mesh, model, path, [&](CheckpointWriter& writer) {
    writer.set_attribute("optimizer_step", model->optimizer_step());
    writer.set_attribute("step", state.step);
    writer.set_attribute("data_position", state.data_position);
    writer.set_attribute("seed", static_cast<int64_t>(run.seed));
    writer.set_config(run.to_attributes());
  });
}

TrainState load_checkpoint(const std::string& path, parallel::DataParallel& dp, const nn::ModelConfig& expected) {
  auto r = open_for(path, expected);
  dp.load(*r);
  return {r->int_attribute("step"), r->int_attribute("data_position")};
}

nn::ModelConfig checkpoint_model_config(const std::string& path) {
  return model_config_from(CheckpointReader(path).config(), path);
}

void load_weights(const std::string& path, nn::Module& model, const nn::ModelConfig& expected,
                  std::shared_ptr<const parallel::ModelShards> shards) {
  auto r = open_for(path, expected);
  const parallel::ParamIO io(std::move(shards));
  for (auto& [name, p] : model.named_parameters()) io.read(*r, "params/" + name, name, p.shape(), p.span());
}

}  // namespace shardlab::cli
