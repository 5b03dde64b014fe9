// generate: load a train_gpt checkpoint and continue a prompt, greedily or by sampling,
// on one process or with the weights and the KV cache split over a tensor axis. Without
// --tokenizer bytes are tokens, and a model trained on llm.c token shards is refused; with
// one the prompts are encoded and the output decoded by it (framework/text/tokenizer.h).
//
//   generate --ckpt runs/ckpt_002000.h5 --prompt "12+34=" --max-new 8
//   generate --ckpt runs/ckpt_002000.h5 --prompt "Once" --temperature 0.8 --top-k 40
//   generate --ckpt runs/gpt2.h5 --tokenizer gpt2/tokenizer.json --prompt "Once upon a time"
//            --temperature 0.8 --top-p 0.95 --stop "<|endoftext|>" --stop "The End"
//   mpirun -n 2 generate --ckpt runs/ckpt_002000.h5 --prompt "12+34=" --mesh tensor=2
//   generate --ckpt runs/ckpt_002000.h5 --prompts prompts.txt        (one prompt per line, one batch)
//   generate --ckpt runs/ckpt_002000.h5 --max-new 500 --sliding-window (past the context)
//   generate --ckpt runs/ckpt_002000.h5 --prompt "12+34=" --precision bf16  (bf16 matmuls)
//
// Under --precision bf16 every matmul multiplies bf16 operands with fp32 accumulation
// (framework/precision.h), and the weights' bf16 copies are made once after loading
// (framework/ops/compute_copies.h), so decoding a token reads 2 bytes per parameter on the
// native path rather than converting the fp32 weights again.
//
// The text goes to stdout; to stderr, the precision each part ran in and the measured
// prefill and per-token decode latency, with the cost model's prediction on the calibrated
// local profile beside them.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <variant>
#include <cxxopts.hpp>

#include "framework/checkpoint.h"
#include "framework/data/token_files.h"
#include "framework/error.h"
#include "framework/memory.h"
#include "framework/ops/compute_copies.h"
#include "framework/text/tokenizer_files.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/comm_context.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/inference/prefill_decode.h"
#include "parallel/layout.h"
#include "parallel/parallelize.h"
#include "parallel/runtime/local_profile.h"
#include "parallel/runtime/precision_choice.h"
#include "parallel/runtime/sampling.h"
#include "parallel/runtime/training_state.h"
#include "examples/parse_flags.h"

using namespace shardlab;

namespace {

// One line on stderr: prefill and decode, measured, and predicted by the cost model on the
// calibrated `local` profile (over `chips` ranks, batch as run; the KV cache and activations
// in fp32, the weights in the dtype the matmuls read: bf16 on the native bf16 path).
void report_latency(const runtime::SampleTiming& t, const nn::ModelConfig& config, int chips,
                    const PrecisionPolicy& policy) {
  const double decode_ms = t.decode_steps > 0 ? 1e3 * t.decode_seconds / t.decode_steps : 0.0;
  const long long B = t.batch;
  std::fprintf(stderr,
               "batch %lld | prefill %lld x %lld tokens: %.2f ms (%.0f tokens/s) | decode %lld steps: %.3f ms per step "
               "(%.0f tokens/s)",
               B, B, static_cast<long long>(t.prompt_tokens), 1e3 * t.prefill_seconds,
               t.prefill_seconds > 0 ? B * t.prompt_tokens / t.prefill_seconds : 0.0,
               static_cast<long long>(t.decode_steps), decode_ms, decode_ms > 0 ? 1e3 * B / decode_ms : 0.0);
  if (t.slides > 0) {
    std::fprintf(stderr, " | %lld window slides: %.2f ms", static_cast<long long>(t.slides), 1e3 * t.slide_seconds);
  }
  const cost::HardwareProfile hw = cost::hardware("local");
  if (!hw.calibrated) {
    std::fprintf(stderr, ", measured (no prediction: the local profile is not calibrated; run `shardlab-plan calibrate`)\n");
    return;
  }
  const cost::ServedModel served = cost::served_model(cost::shape_of(config), cost::DType::kFp32);
  const bool bf16_weights = policy.compute == DType::kBF16 && policy.matmul == Bf16Matmul::kNative;
  const cost::InferenceConfig prefill{.batch = t.batch, .context = t.prompt_tokens, .chips = chips,
                                      .weights = bf16_weights ? cost::DType::kBf16 : cost::DType::kFp32,
                                      .activations = cost::DType::kFp32};
  cost::InferenceConfig decode = prefill;
  decode.context = t.prompt_tokens + t.decode_steps / 2;  // the cache's mean length while decoding
  std::fprintf(stderr, ", measured; predicted on the local profile: prefill %.2f ms, decode %.3f ms per step\n",
               1e3 * cost::estimate_prefill(served, prefill, hw).seconds,
               1e3 * cost::estimate_decode(served, decode, hw).step_seconds);
}

// One line on stderr: what ran in which precision and what the weights' compute copies held.
void report_precision(const PrecisionPolicy& policy, const ComputeCopies& copies) {
  std::fprintf(stderr, "precision: %s", policy.describe().c_str());
  if (copies.tensors() > 0) {
    const char* form = policy.compute != DType::kBF16 ? "fp32 decode-panel"
                       : policy.matmul == Bf16Matmul::kNative ? "bf16 (and bf16 decode-panel)"
                                                                : "bf16-rounded fp32 (and bf16 decode-panel)";
    std::fprintf(stderr, " | weights multiplied from %s copies made once: %lld tensors, %s, %lld matmul operands", form,
                 static_cast<long long>(copies.tensors()), format_bytes(copies.bytes()).c_str(),
                 static_cast<long long>(copies.served()));
  }
  std::fprintf(stderr, "\n");
}

// Text to ids and back: a tokenizer's, or bytes are tokens.
struct Codec {
  std::unique_ptr<text::Tokenizer> tokenizer;  // null: bytes

  std::vector<int> encode(const std::string& text, const nn::ModelConfig& config) const {
    if (tokenizer) return tokenizer->encode(text);
    std::vector<int> ids;
    for (char c : text) {
      const int id = static_cast<unsigned char>(c);
      if (id >= config.vocab) throw UserError("prompt byte " + std::to_string(id) + " is outside the model vocabulary");
      ids.push_back(id);
    }
    return ids;
  }
  std::string decode(const std::vector<int>& ids) const {
    if (tokenizer) return tokenizer->decode(ids);
    return std::string(ids.begin(), ids.end());
  }
};

// Without a tokenizer, generate reads prompts and prints output as bytes, one token each; a
// model trained on llm.c token shards (GPT-2 ids) would be fed bytes and print its ids as
// bytes, garbage: refused, naming the data, as is a model trained with --tokenizer. With one, the tokenizer's ids must all be rows
// of the model's embedding. A checkpoint without `data` (from before it was stored) was
// trained on the arithmetic task.
void check_vocabulary(const std::string& path, const nn::ModelConfig& config, const Codec& codec) {
  if (codec.tokenizer) {
    if (codec.tokenizer->vocab_size() > config.vocab) {
      throw UserError("--tokenizer has " + std::to_string(codec.tokenizer->vocab_size()) + " token ids but checkpoint " +
                      path + "'s model has a vocabulary of " + std::to_string(config.vocab) +
                      "; give the tokenizer the model was trained with");
    }
    return;
  }
  const Attributes attributes = CheckpointReader(path).config();
  const auto trained_with = attributes.find("tokenizer");
  if (trained_with != attributes.end() && std::holds_alternative<std::string>(trained_with->second) &&
      !std::get<std::string>(trained_with->second).empty()) {
    const std::string& file = std::get<std::string>(trained_with->second);
    throw UserError("checkpoint " + path + " was trained on text encoded by --tokenizer " + file +
                    "; pass --tokenizer " + file + " (bytes are not its tokens)");
  }
  const auto data = attributes.find("data");
  if (data == attributes.end() || !std::holds_alternative<std::string>(data->second)) return;
  const std::string& trained_on = std::get<std::string>(data->second);
  if (!data::is_token_shard(trained_on)) return;
  throw UserError("checkpoint " + path + " was trained on llm.c token shards (--data " + trained_on +
                  "), but generate has no --tokenizer: it reads the prompt and prints the output as bytes, one token "
                  "each, which for this model would be garbage; pass --tokenizer with the tokenizer the shards were "
                  "made with (prepare_data --tokenizer)");
}

// The prompts' texts: --prompt, or --prompts FILE with one prompt per line (empty lines
// skipped).
std::vector<std::string> read_prompts(const cxxopts::ParseResult& p) {
  std::vector<std::string> texts;
  if (p.count("prompts")) {
    const std::string path = p["prompts"].as<std::string>();
    std::ifstream in(path);
    if (!in) throw UserError("cannot read --prompts file " + path + ": " + std::strerror(errno));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) texts.push_back(line);
    }
    if (texts.empty()) throw UserError("--prompts file " + path + " holds no prompt; write one prompt per line");
  } else {
    texts.push_back(p["prompt"].as<std::string>());
    if (texts[0].empty()) throw UserError("--prompt is empty; give at least one byte of text to continue (default: a newline)");
  }
  return texts;
}

// Where a row's new text ends: before the first stop string, after the first newline under
// --stop-at-newline, or at its end; std::string::npos when it runs on.
size_t stop_position(const std::string& text, const std::vector<std::string>& stops, bool at_newline) {
  size_t end = std::string::npos;
  for (const std::string& s : stops) end = std::min(end, text.find(s));
  if (at_newline && text.find('\n') != std::string::npos) end = std::min(end, text.find('\n') + 1);
  return end;
}

int run(int argc, char** argv) {
  cxxopts::Options o("generate", "Sample text from a train_gpt checkpoint (KV-cached decoding).");
  o.add_options()("ckpt", "checkpoint file (.h5) written by train_gpt on byte-level data (arithmetic or a text file)", cxxopts::value<std::string>())(
      "prompt", "text to continue", cxxopts::value<std::string>()->default_value("\n"))(
      "tokenizer", "Hugging Face tokenizer.json or tiktoken file that encodes the prompts and decodes the output "
      "(default: bytes are tokens)", cxxopts::value<std::string>())(
      "prompts", "file of prompts, one per line, decoded together as one batch (left-padded to one length)",
      cxxopts::value<std::string>())(
      "sliding-window", "let the output run past the model context: when the KV cache fills, keep each "
      "row's last context/2 tokens and prefill them again")(
      "max-new", "tokens to generate", cxxopts::value<int>()->default_value("64"))(
      "temperature", "0 for greedy, else softmax temperature", cxxopts::value<float>()->default_value("0"))(
      "top-k", "sample among the k most likely tokens (0: all)", cxxopts::value<int>()->default_value("0"))(
      "top-p", "nucleus sampling: among the fewest most likely tokens whose probabilities reach p (1: all)",
      cxxopts::value<float>()->default_value("1"))(
      "stop", "stop a row at this text (repeatable); a special token's text (<|endoftext|>) stops at that token. "
      "The stop is not printed", cxxopts::value<std::vector<std::string>>())(
      "seed", "sampling seed", cxxopts::value<uint64_t>()->default_value("0"))(
      "collective-timeout", "seconds a rank may wait in one collective before the job is aborted, naming the "
      "missing rank (0: 300)", cxxopts::value<double>()->default_value("0"))(
      "stop-at-newline", "stop after the first newline (printed)")(
      "precision", "matmul dtype: fp32, or bf16 (bf16 operands, fp32 accumulation)",
      cxxopts::value<std::string>()->default_value("fp32"))(
      "bf16-matmul", "bf16 matmul kernels: auto (measured), native (oneDNN's bf16) or rounded (fp32 kernels on "
      "bf16-rounded operands); SHARDLAB_BF16_MATMUL overrides it", cxxopts::value<std::string>()->default_value("auto"))(
      "mesh", "mesh axes: data=1 (one process) or tensor=N (weights and KV cache split by heads over N ranks)",
      cxxopts::value<std::string>()->default_value("data=1"))("h,help", "print this help");
  const cxxopts::ParseResult p = cli::parse_flags(o, argc, argv);
  if (p.count("help")) return std::printf("%s\n", o.help().c_str()), 0;
  if (!p.count("ckpt")) throw UserError("--ckpt is required: the checkpoint file to load (see train_gpt --ckpt-dir)");
  const std::string path = p["ckpt"].as<std::string>();
  const double timeout = parallel::collective_timeout_from_flag(p["collective-timeout"].as<double>());
  const int max_new = p["max-new"].as<int>();
  if (max_new <= 0) throw UserError("--max-new must be positive, got " + std::to_string(max_new));
  if (p["temperature"].as<float>() < 0) {
    throw UserError("--temperature must be 0 (greedy) or positive, got " + std::to_string(p["temperature"].as<float>()));
  }
  if (p["top-k"].as<int>() < 0) {
    throw UserError("--top-k must be 0 (all tokens) or positive, got " + std::to_string(p["top-k"].as<int>()));
  }
  const float top_p = p["top-p"].as<float>();
  if (!(top_p > 0.0f && top_p <= 1.0f)) throw UserError("--top-p must be above 0 and at most 1, got " + format_number(top_p));
  if (p.count("prompts") && p.count("prompt")) throw UserError("give --prompt or --prompts FILE, not both");
  const bool sliding = p.count("sliding-window") > 0;
  const std::string precision = p["precision"].as<std::string>(), bf16_matmul = p["bf16-matmul"].as<std::string>();
  const DType compute = parse_dtype(precision, "--precision");
  runtime::check_bf16_matmul_flag(compute, precision, bf16_matmul);

  const nn::ModelConfig config = runtime::checkpoint_model_config(path);
  Codec codec;
  if (p.count("tokenizer")) {
    codec.tokenizer = std::make_unique<text::Tokenizer>(text::read_tokenizer_file(p["tokenizer"].as<std::string>()));
  }
  check_vocabulary(path, config, codec);
  const std::vector<std::string> texts = read_prompts(p);
  std::vector<std::vector<int>> prompts;
  for (const std::string& t : texts) prompts.push_back(codec.encode(t, config));
  // --stop: a special token's text stops at that id, any other text once a row's text holds it.
  std::vector<int> stop_tokens;
  std::vector<std::string> stop_strings;
  for (const std::string& s : p.count("stop") ? p["stop"].as<std::vector<std::string>>() : std::vector<std::string>{}) {
    if (s.empty()) throw UserError("--stop is empty; give the text that ends a row");
    const std::optional<int> special = codec.tokenizer ? codec.tokenizer->special_id(s) : std::nullopt;
    if (special) {
      stop_tokens.push_back(*special);
    } else {
      stop_strings.push_back(s);
    }
  }
  const bool at_newline = p.count("stop-at-newline") > 0;
  size_t longest = 0;
  for (const auto& ids : prompts) longest = std::max(longest, ids.size());
  if (!sliding && static_cast<int64_t>(longest) + max_new > config.context) {
    throw UserError("the longest prompt's " + std::to_string(longest) + " tokens plus --max-new " +
                    std::to_string(max_new) + " exceed the model context " + std::to_string(config.context) +
                    "; shorten the prompt, lower --max-new, or pass --sliding-window to let the output run on");
  }
  // Every rank validates the layout against the model before the first collective.
  const parallel::Layout layout = parallel::Layout::from_spec(p["mesh"].as<std::string>());
  layout.validate({.model = config}, parallel::Comm::borrowed(MPI_COMM_WORLD).size());
  if (layout.data_ranks() > 1) {
    throw UserError("generate decodes every prompt on every rank: mesh " + layout.describe() +
                    " has data ranks; use tensor=N to split the model instead");
  }
  parallel::Mesh mesh(MPI_COMM_WORLD, layout.axes);
  mesh.context().watchdog.set_timeout(timeout);
  runtime::ensure_local_profile(mesh, stderr);  // stdout is the generated text
  const auto model_owned = nn::deferred_transformer(config);  // each rank allocates only its shards
  nn::Transformer& model = *model_owned;
  // Under bf16 the tensor axis's all_reduces carry bf16 partial sums, summed in fp32, as
  // training's do (--activation-dtype auto): half the bytes per decoded token.
  parallel::ParallelConfig inference;
  inference.precision.activation = compute;
  const auto shards = [&] {
    const nn::WeightsLoadedNext loading;  // read next: seeding them first cost more than the read
    return parallel::parallelize_for_inference(model, mesh, inference);
  }();
  runtime::load_weights(path, model, config, shards);
  // Collective under bf16: every rank multiplies the same way. Nothing is reduced here.
  PrecisionPolicy asked;
  asked.compute = asked.gather = asked.activation = compute;
  const PrecisionPolicy policy = runtime::choose_precision(asked, bf16_matmul, mesh, Bf16Workload::kDecoding);
  // The matrices (norms' weights and biases never enter a matmul), converted once for the
  // whole decode: they do not change from here on.
  std::vector<Tensor> matrices;
  for (const nn::Parameter& parameter : model.parameters()) {
    if (parameter.tensor->ndim() >= 2) matrices.push_back(*parameter.tensor);
  }
  // Each also laid out in 16-column panels for the decode step's few-row products
  // (framework/ops/matvec.h): one contiguous stream per panel, at the memory's rate.
  const ComputeCopies copies(matrices, policy.compute_precision(), {.decode_panels = true});

  const runtime::SampleOptions options{.max_new = max_new,
                                   .temperature = p["temperature"].as<float>(),
                                   .top_k = p["top-k"].as<int>(),
                                   .top_p = top_p,
                                   .seed = p["seed"].as<uint64_t>(),
                                   .vocab_limit = codec.tokenizer ? codec.tokenizer->vocab_size() : 0,
                                   .stop_tokens = stop_tokens,
                                   .stop_when = [&](const std::vector<int>& out) {
                                     return (!stop_strings.empty() || at_newline) &&
                                            stop_position(codec.decode(out), stop_strings, at_newline) != std::string::npos;
                                   },
                                   .sliding_window = sliding};
  runtime::SampleTiming timing;
  const auto outputs = [&] {
    const PrecisionScope scope(policy.compute_precision());
    return runtime::sample(model, prompts, options, &timing);  // the same on every rank
  }();
  if (mesh.rank() == 0) {
    for (size_t r = 0; r < prompts.size(); ++r) {
      if (r > 0) std::printf("---\n");  // between the results of a --prompts batch
      std::vector<int> out = outputs[r];
      if (!out.empty() && std::find(stop_tokens.begin(), stop_tokens.end(), out.back()) != stop_tokens.end()) {
        out.pop_back();  // the stop token is not printed
      }
      std::string text = codec.decode(out);
      text.resize(std::min(text.size(), stop_position(text, stop_strings, at_newline)));
      std::fwrite(texts[r].data(), 1, texts[r].size(), stdout);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::printf("\n");
    }
    std::fflush(stdout);
    report_precision(policy, copies);
    report_latency(timing, config, mesh.size(), policy);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::MpiRuntime mpi(argc, argv);
  return parallel::run_mpi_main(MPI_COMM_WORLD, [&] { return run(argc, argv); });
}
