// convert: weights between a shardlab checkpoint and a Hugging Face model directory
// (config.json + model.safetensors; GPT2LMHeadModel or LlamaForCausalLM), both ways,
// bit-exact (docs/models.md). One process, no MPI: a checkpoint is unsharded on disk,
// whatever layout wrote it.
//
//   convert --from runs/ckpt_001000.h5 --to hf/ --format hf   # then GPT2LMHeadModel.from_pretrained("hf/")
//   convert --from hf/ --to init.h5                           # then train_gpt --init-from init.h5 (or hf/ itself)
#include <cstdio>
#include <filesystem>
#include <cxxopts.hpp>

#include "framework/checkpoint.h"
#include "framework/error.h"
#include "framework/hf_model.h"
#include "parallel/runtime/training_state.h"
#include "examples/parse_flags.h"

using namespace shardlab;

namespace {

// A shardlab checkpoint's parameters into a Hugging Face model directory.
void export_hf(const std::string& from, const std::string& to) {
  const nn::ModelConfig config = runtime::checkpoint_model_config(from);
  const CheckpointReader reader(from);
  hf::export_model(
      config,
      [&](const std::string& name, const Shape& shape) {
        std::vector<float> values(static_cast<size_t>(numel_of(shape)));
        reader.read("params/" + name, shape, values);
        return values;
      },
      to);
  std::printf("wrote %s/config.json and %s/model.safetensors: %s\n", to.c_str(), to.c_str(), config.describe().c_str());
}

// A Hugging Face model directory into a shardlab checkpoint holding its parameters and model config.
void import_hf(const std::string& from, const std::string& to) {
  const nn::ModelConfig config = hf::read_config(from);
  hf::import_checkpoint(from, config, to);
  std::printf("wrote %s: %s\n", to.c_str(), config.describe().c_str());
}

int run(int argc, char** argv) {
  cxxopts::Options o("convert",
                     "Weights between a shardlab checkpoint and a Hugging Face model directory (docs/models.md).\n"
                     "  convert --from CKPT.h5 --to DIR [--format hf]   export\n"
                     "  convert --from DIR --to CKPT.h5                 import");
  o.add_options()("from", "a shardlab checkpoint (.h5) or a Hugging Face model directory", cxxopts::value<std::string>())(
      "to", "where to write: a directory for an export, a .h5 file for an import", cxxopts::value<std::string>())(
      "format", "the other side's format: hf (config.json + model.safetensors)",
      cxxopts::value<std::string>()->default_value("hf"))("h,help", "print this help");
  const cxxopts::ParseResult p = cli::parse_flags(o, argc, argv);
  if (p.count("help")) return std::printf("%s\n", o.help().c_str()), 0;
  if (!p.count("from") || !p.count("to")) throw UserError("--from and --to are required; see convert --help");
  const std::string format = p["format"].as<std::string>();
  if (format != "hf") throw UserError("--format '" + format + "' is not one convert writes; use hf");
  const std::string from = p["from"].as<std::string>(), to = p["to"].as<std::string>();
  if (!std::filesystem::exists(from)) throw UserError("--from '" + from + "' does not exist");
  if (std::filesystem::is_directory(from)) {
    import_hf(from, to);
  } else {
    export_hf(from, to);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
