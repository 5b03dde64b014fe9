#include "parallel/runtime/training_state.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <variant>
#include <vector>

#include "framework/data/token_files.h"
#include "framework/error.h"
#include "framework/output_path.h"
#include "parallel/comm/comm.h"
#include "parallel/data_parallel/sharded_io.h"

namespace shardlab::runtime {
namespace {

// Opens a checkpoint and checks it holds the model this run builds.
std::unique_ptr<CheckpointReader> open_for(const std::string& path, const nn::ModelConfig& expected) {
  auto r = std::make_unique<CheckpointReader>(path);
  const nn::ModelConfig stored = model_config_from(r->config(), path);
  const bool same = stored.arch == expected.arch && stored.vocab == expected.vocab &&
                    stored.context == expected.context && stored.d_model == expected.d_model &&
                    stored.n_layers == expected.n_layers && stored.n_heads == expected.n_heads &&
                    stored.n_kv_heads == expected.n_kv_heads && stored.d_ff == expected.d_ff &&
                    stored.rope_theta == expected.rope_theta && stored.norm_eps == expected.norm_eps &&
                    stored.experts == expected.experts && stored.top_k == expected.top_k &&
                    stored.moe_every == expected.moe_every;
  if (!same) {
    throw UserError("checkpoint " + path + " holds a different model (" + stored.describe() + ") than this run (" +
                    expected.describe() + "); pass the model flags it was trained with");
  }
  return r;
}

}  // namespace

namespace {

// Removes what checkpoint writes that never finished left in `dir` (<name>.h5.tmp: a
// process killed mid-write; the complete checkpoints beside them are untouched).
void remove_interrupted_writes(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt_", 0) != 0 || !name.ends_with(".h5.tmp")) continue;
    std::filesystem::remove(entry.path(), error);
    std::printf("removed %s: a checkpoint write that did not finish\n", entry.path().string().c_str());
  }
}

}  // namespace

void prepare_output_paths(const RunConfig& run, MPI_Comm comm) {
  int rank = 0;
  SL_MPI(MPI_Comm_rank(comm, &rank));
  std::string error;
  try {
    check_writable_directory(run.ckpt_dir, "--ckpt-dir");
    if (rank == 0) {
      remove_interrupted_writes(run.ckpt_dir);
      check_writable_file(run.metrics, "--metrics");
      check_writable_file(run.trace, "--trace");
      check_writable_file(run.dump_grads, "--dump-grads");
    }
  } catch (const UserError& e) {
    error = e.what();
  }
  // Only rank 0 checks the logs: the others would wait for it in their next collective
  // until the abort (3 s), where this ends every rank with rank 0's message.
  parallel::raise_agreed_error(comm, error);
}

std::string resolve_resume(const std::string& resume, const std::string& dir) {
  if (resume != "latest") return resume;
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt_", 0) == 0 && entry.path().extension() == ".h5") found.push_back(entry.path().string());
  }
  std::sort(found.rbegin(), found.rend());  // ckpt_000300.h5 before ckpt_000200.h5
  for (const std::string& path : found) {
    try {
      CheckpointReader reader(path);  // a damaged file is passed over for the one before
      return path;
    } catch (const UserError&) {
    }
  }
  throw UserError("--resume latest found no complete checkpoint in --ckpt-dir '" + dir +
                  "'; train without --resume or give a checkpoint path");
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt_%06lld.h5", static_cast<long long>(step));
  return (std::filesystem::path(dir) / name).string();
}

void save_checkpoint(const std::string& path, const parallel::Mesh& mesh, const parallel::ParallelModel& model,
                     const optim::Optimizer& optimizer, const TrainState& state, const RunConfig& run) {
  if (mesh.rank() == 0) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
  }
  parallel::save_checkpoint(mesh, model, optimizer, path,
                            [&](CheckpointSink& sink) { write_run_attributes(sink, state, run); });
}

void write_run_attributes(CheckpointSink& sink, const TrainState& state, const RunConfig& run) {
  sink.set_attribute("step", state.step);
  sink.set_attribute("data_position", state.data_position);
  sink.set_attribute("seed", static_cast<int64_t>(run.seed));
  sink.set_config(run.to_attributes());
  sink.set_attribute("run_config", run.settings);  // every setting, for --config ckpt.h5
}

TrainState load_checkpoint(const std::string& path, const parallel::ParallelModel& model, optim::Optimizer& optimizer,
                           const nn::ModelConfig& expected) {
  auto r = open_for(path, expected);
  parallel::load_checkpoint(*r, model, optimizer);
  return {r->int_attribute("step"), r->int_attribute("data_position")};
}

void check_data_order(const std::string& path, const RunConfig& run) {
  if (!data::is_token_shard(run.data)) return;
  const CheckpointReader r(path);
  const Attributes config = r.config();
  const auto saved = config.find("shuffle");
  if (saved == config.end() || !std::holds_alternative<int64_t>(saved->second)) return;  // before shard sets
  const bool shuffle = std::get<int64_t>(saved->second) != 0;
  const auto seed = static_cast<uint64_t>(r.int_attribute("seed"));
  if (shuffle == run.shuffle && (!shuffle || seed == run.seed)) return;
  const auto order = [](bool shuffled, uint64_t s) {
    return shuffled ? "--shuffle=true --seed " + std::to_string(s) : std::string("--shuffle=false");
  };
  throw UserError("checkpoint " + path + " was trained on " + run.data + " read with " + order(shuffle, seed) +
                  ", but this run has " + order(run.shuffle, run.seed) + ", so it would read other rows than the "
                  "interrupted run; resume with " + order(shuffle, seed));
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

}  // namespace shardlab::runtime
