#include "parallel/runtime/init_from.h"

#include <unistd.h>

#include <filesystem>
#include <functional>

#include "framework/checkpoint.h"
#include "framework/error.h"
#include "framework/hf_model.h"
#include "framework/llmc_model.h"
#include "optim/make_optimizer.h"
#include "parallel/runtime/run_config.h"

namespace shardlab::runtime {
namespace {

// The first model field that differs, as a UserError naming the field, both values and the flag.
void check_same_model(const nn::ModelConfig& stored, const nn::ModelConfig& run, const std::string& source) {
  const auto n = [](double v) { return format_number(v); };
  const struct {
    const char* field;
    const char* flag;
    std::string weights, ours;
    bool same;
  } fields[] = {
      {"arch", "arch", nn::arch_name(stored.arch), nn::arch_name(run.arch), stored.arch == run.arch},
      {"vocab", "vocab", n(stored.vocab), n(run.vocab), stored.vocab == run.vocab},
      {"context", "context", n(stored.context), n(run.context), stored.context == run.context},
      {"d_model", "d-model", n(stored.d_model), n(run.d_model), stored.d_model == run.d_model},
      {"n_layers", "layers", n(stored.n_layers), n(run.n_layers), stored.n_layers == run.n_layers},
      {"n_heads", "heads", n(stored.n_heads), n(run.n_heads), stored.n_heads == run.n_heads},
      {"n_kv_heads", "kv-heads", n(stored.n_kv_heads), n(run.n_kv_heads), stored.n_kv_heads == run.n_kv_heads},
      {"d_ff", "d-ff", n(stored.d_ff), n(run.d_ff), stored.d_ff == run.d_ff},
      {"rope_theta", "rope-theta", n(stored.rope_theta), n(run.rope_theta), stored.rope_theta == run.rope_theta},
      {"norm_eps", "norm-eps", n(stored.norm_eps), n(run.norm_eps), stored.norm_eps == run.norm_eps},
      {"experts", "experts", n(stored.experts), n(run.experts), stored.experts == run.experts},
  };
  for (const auto& f : fields) {
    if (f.same) continue;
    throw UserError("--init-from " + source + ": the weights have " + f.field + " " + f.weights +
                    " but this run's model has " + f.ours + "; pass --" + f.flag + " " + f.weights +
                    " (and the other model flags the weights were made with)");
  }
}

// Imported weights as a checkpoint file of this process's own (removed on destruction).
struct ImportedCopy {
  std::string path;
  explicit ImportedCopy(const std::function<void(const std::string& path)>& import) {
    path = (std::filesystem::temp_directory_path() / ("shardlab-init-" + std::to_string(getpid()) + ".h5")).string();
    import(path);
  }
  ~ImportedCopy() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

}  // namespace

void init_from(const std::string& source, const parallel::ParallelModel& model, const nn::ModelConfig& expected) {
  if (!std::filesystem::exists(source)) {
    throw UserError("--init-from '" + source +
                    "' does not exist; give a shardlab checkpoint, a Hugging Face model directory or an llm.c model file");
  }
  std::unique_ptr<ImportedCopy> copy;
  std::string path = source;
  const bool hf_dir = std::filesystem::is_directory(source);
  if (hf_dir || llmc::is_model_file(source)) {
    const nn::ModelConfig stored = hf_dir ? hf::read_config(source) : llmc::read_config(source);
    check_same_model(stored, expected, source);  // before reading any weights
    copy = std::make_unique<ImportedCopy>([&](const std::string& to) {
      if (hf_dir) {
        hf::import_checkpoint(source, stored, to);
      } else {
        llmc::import_checkpoint(source, stored, to);
      }
    });
    path = copy->path;
  }
  const CheckpointReader reader(path);
  check_same_model(model_config_from(reader.config(), source), expected, source);
  // An optimizer without state (SGD, no momentum): the strategy's load then reads only the
  // parameters, each rank its own part, and the run's optimizer keeps its fresh zero state.
  optim::OptimizerConfig sgd;
  sgd.name = "sgd";
  const auto stateless = optim::make_optimizer(sgd, model.parameters());
  model.gradient_sync().load(reader, *stateless);
}

}  // namespace shardlab::runtime
