// convert: weights between a shardlab checkpoint and a Hugging Face model directory
// (config.json + model.safetensors, or its shards and model.safetensors.index.json;
// GPT2LMHeadModel or LlamaForCausalLM) or an llm.c GPT-2 model file, both ways, bit-exact
// (docs/models.md). One process, no MPI: a checkpoint is unsharded on disk, whatever
// layout wrote it. What --from is decides the direction: a checkpoint is exported (to
// --format), a directory or an llm.c file imported into a checkpoint.
//
//   convert --from runs/ckpt_001000.h5 --to hf/ --format hf   # then GPT2LMHeadModel.from_pretrained("hf/")
//   convert --from runs/ckpt_001000.h5 --to m.bin --format llmc  # then llm.c's gpt2_build_from_checkpoint
//   convert --from hf/ --to init.h5                           # then train_gpt --init-from init.h5 (or hf/ itself)
//   convert --from gpt2_124M.bin --to init.h5                 # an llm.c model file
#include <cstdio>
#include <filesystem>
#include <cxxopts.hpp>

#include "framework/checkpoint.h"
#include "framework/error.h"
#include "framework/hf_model.h"
#include "framework/llmc_model.h"
#include "framework/safetensors_dir.h"
#include "parallel/runtime/training_state.h"
#include "examples/parse_flags.h"

using namespace shardlab;

namespace {

// The values of a checkpoint's parameters, one whole tensor at a time.
ParamSource checkpoint_params(const CheckpointReader& reader) {
  return [&reader](const std::string& name, const Shape& shape) {
    std::vector<float> values(static_cast<size_t>(numel_of(shape)));
    reader.read("params/" + name, shape, values);
    return values;
  };
}

// A shardlab checkpoint's parameters into a Hugging Face directory or an llm.c model file.
void export_checkpoint(const std::string& from, const std::string& to, const std::string& format,
                       int64_t max_shard_bytes) {
  nn::ModelConfig config;
  try {
    config = runtime::checkpoint_model_config(from);
  } catch (const UserError& e) {
    throw UserError(std::string(e.what()) + "; --from takes a shardlab checkpoint, an llm.c model file (magic " +
                    std::to_string(llmc::kModelMagic) + ") or a Hugging Face model directory");
  }
  const CheckpointReader reader(from);
  if (format == "llmc") {
    llmc::export_model(config, checkpoint_params(reader), to);
    std::printf("wrote %s (llm.c, version 3, vocabulary padded to a multiple of %lld): %s\n", to.c_str(),
                static_cast<long long>(llmc::kVocabMultiple), config.describe().c_str());
    return;
  }
  hf::export_model(config, checkpoint_params(reader), to, max_shard_bytes);
  const SafetensorsDir written(to);  // reads back what was written: the index and every shard
  const std::string weights = written.sharded() ? std::string(kSafetensorsIndex) + " with " +
                                                      std::to_string(written.file_count()) + " shards"
                                                : std::string(kSafetensorsFile);
  std::printf("wrote %s/config.json and %s/%s: %s\n", to.c_str(), to.c_str(), weights.c_str(), config.describe().c_str());
}

// A Hugging Face model directory or an llm.c model file into a checkpoint holding its
// parameters and model config.
void import_weights(const std::string& from, const std::string& to) {
  nn::ModelConfig config;
  if (std::filesystem::is_directory(from)) {
    config = hf::read_config(from);
    hf::import_checkpoint(from, config, to);
  } else {
    config = llmc::read_config(from);
    llmc::import_checkpoint(from, config, to);
  }
  std::printf("wrote %s: %s\n", to.c_str(), config.describe().c_str());
}

int run(int argc, char** argv) {
  cxxopts::Options o("convert",
                     "Weights between a shardlab checkpoint and a Hugging Face model directory or an llm.c GPT-2\n"
                     "model file, bit-exact (docs/models.md).\n"
                     "  convert --from CKPT.h5 --to DIR [--format hf] [--max-shard-size 5e9]   export to Hugging Face\n"
                     "  convert --from CKPT.h5 --to FILE.bin --format llmc                     export to llm.c\n"
                     "  convert --from DIR|FILE.bin --to CKPT.h5                               import either");
  o.add_options()("from", "a shardlab checkpoint (.h5), a Hugging Face model directory or an llm.c model file",
                  cxxopts::value<std::string>())(
      "to", "where to write: a directory (hf) or a file (llmc) for an export, a .h5 file for an import",
      cxxopts::value<std::string>())(
      "format", "an export's format: hf (config.json + safetensors) or llmc (llm.c's GPT-2 model file, version 3)",
      cxxopts::value<std::string>()->default_value("hf"))(
      "max-shard-size", "hf: the largest safetensors file in bytes (5e9, 500M); past it the weights are split into "
      "model-0000i-of-0000N.safetensors with model.safetensors.index.json, as transformers does",
      cxxopts::value<std::string>()->default_value("5e9"))("h,help", "print this help");
  const cxxopts::ParseResult p = cli::parse_flags(o, argc, argv);
  if (p.count("help")) return std::printf("%s\n", o.help().c_str()), 0;
  if (!p.count("from") || !p.count("to")) throw UserError("--from and --to are required; see convert --help");
  const std::string format = p["format"].as<std::string>();
  if (format != "hf" && format != "llmc") {
    throw UserError("--format '" + format + "' is not one convert writes; use hf or llmc");
  }
  const int64_t max_shard_bytes = parse_count(p["max-shard-size"].as<std::string>(), "max-shard-size");
  const std::string from = p["from"].as<std::string>(), to = p["to"].as<std::string>();
  if (!std::filesystem::exists(from)) throw UserError("--from '" + from + "' does not exist");
  const bool exporting = !std::filesystem::is_directory(from) && !llmc::is_model_file(from);
  if (p.count("max-shard-size") && !(exporting && format == "hf")) {
    throw UserError("--max-shard-size applies to an export with --format hf, from a shardlab checkpoint");
  }
  if (exporting) {
    export_checkpoint(from, to, format, max_shard_bytes);
  } else {
    import_weights(from, to);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::exit_on_user_error([&] { return run(argc, argv); }); }
