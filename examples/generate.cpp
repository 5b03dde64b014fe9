// generate: load a train_gpt checkpoint and continue a prompt, greedily or by sampling.
//
//   generate --ckpt runs/ckpt_002000.h5 --prompt "12+34=" --max-new 8
//   generate --ckpt runs/ckpt_002000.h5 --prompt "Once" --temperature 0.8 --top-k 40
#include <cstdio>
#include <cxxopts.hpp>

#include "examples/support/main_guard.h"
#include "examples/support/sampling.h"
#include "examples/support/training_state.h"

using namespace shardlab;

namespace {

int run(int argc, char** argv) {
  cxxopts::Options o("generate", "Sample text from a train_gpt checkpoint (KV-cached decoding).");
  o.add_options()("ckpt", "checkpoint file (.h5) written by train_gpt", cxxopts::value<std::string>())(
      "prompt", "text to continue (bytes are tokens)", cxxopts::value<std::string>()->default_value("\n"))(
      "max-new", "tokens to generate", cxxopts::value<int>()->default_value("64"))(
      "temperature", "0 for greedy, else softmax temperature", cxxopts::value<float>()->default_value("0"))(
      "top-k", "sample among the k most likely tokens (0: all)", cxxopts::value<int>()->default_value("0"))(
      "seed", "sampling seed", cxxopts::value<uint64_t>()->default_value("0"))(
      "stop-at-newline", "stop after the first newline")("h,help", "print this help");
  cxxopts::ParseResult p;
  try {
    p = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw UserError(std::string(e.what()) + "; run with --help for the list of flags");
  }
  if (p.count("help")) return std::printf("%s\n", o.help().c_str()), 0;
  if (!p.count("ckpt")) throw UserError("--ckpt is required: the checkpoint file to load (see train_gpt --ckpt-dir)");
  const std::string path = p["ckpt"].as<std::string>();
  const int max_new = p["max-new"].as<int>();
  if (max_new <= 0) throw UserError("--max-new must be positive, got " + std::to_string(max_new));

  const nn::ModelConfig config = cli::checkpoint_model_config(path);
  if (max_new >= config.context) {
    throw UserError("--max-new " + std::to_string(max_new) + " must be below the model context " +
                    std::to_string(config.context));
  }
  nn::Transformer model(config);
  cli::load_weights(path, model, config);

  const std::string prompt = p["prompt"].as<std::string>();
  std::vector<int> ids(prompt.begin(), prompt.end());
  for (int& id : ids) id = static_cast<unsigned char>(id);
  for (int id : ids) {
    if (id >= config.vocab) throw UserError("prompt byte " + std::to_string(id) + " is outside the model vocabulary");
  }
  const cli::SampleOptions options{.max_new = max_new,
                                   .temperature = p["temperature"].as<float>(),
                                   .top_k = p["top-k"].as<int>(),
                                   .seed = p["seed"].as<uint64_t>(),
                                   .stop_token = p.count("stop-at-newline") ? '\n' : -1};
  std::string text = prompt;
  for (int t : cli::sample(model, ids, options)) text += static_cast<char>(t);
  std::printf("%s\n", text.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::guarded_main([&] { return run(argc, argv); }); }
