#include "parallel/runtime/data_source.h"

#include "framework/data/token_files.h"
#include "framework/error.h"
#include "framework/text/tokenizer_files.h"

namespace shardlab::runtime {
namespace {

// The tokens of every file `pattern` names: llm.c shards as stored, text files encoded by
// `tokenizer` (each file one document) or, without one, as bytes.
std::vector<uint16_t> read_tokens(const std::string& pattern, const text::Tokenizer* tokenizer) {
  if (tokenizer == nullptr) return data::read_token_files(pattern);
  std::vector<uint16_t> tokens;
  for (const std::string& path : data::expand_data_paths(pattern)) {
    if (data::is_token_shard(path)) {
      const std::vector<uint16_t> more = data::read_shard(path);
      tokens.insert(tokens.end(), more.begin(), more.end());
      continue;
    }
    const std::vector<uint16_t> bytes = data::read_text_bytes(path);
    const std::vector<int> ids = tokenizer->encode(std::string(bytes.begin(), bytes.end()));
    tokens.insert(tokens.end(), ids.begin(), ids.end());
  }
  return tokens;
}

}  // namespace

DataSource open_data(const RunConfig& run) {
  DataSource d;
  if (run.data == "arithmetic") {
    d.task.emplace(data::ArithmeticConfig{.digits = run.digits, .seed = run.seed});
    d.train = d.task->train();
    d.heldout = d.task->heldout();
  } else {
    std::unique_ptr<text::Tokenizer> tokenizer;
    if (!run.tokenizer.empty()) {
      tokenizer = std::make_unique<text::Tokenizer>(text::read_tokenizer_file(run.tokenizer));
      if (tokenizer->vocab_size() > 65536) {
        throw UserError("--tokenizer " + run.tokenizer + " has " + std::to_string(tokenizer->vocab_size()) +
                        " token ids, but train_gpt holds tokens as uint16 (at most 65536 ids, GPT-2's 50257 fit); "
                        "LLaMA 3's 128256 do not yet");
      }
    }
    // Named in logs and errors with the tokenizer of their ids.
    const std::string encoded = tokenizer ? ", tokenizer " + run.tokenizer : "";
    std::vector<uint16_t> tokens = read_tokens(run.data, tokenizer.get());
    if (!run.val_data.empty()) {
      d.heldout = std::make_shared<data::TokenDataset>(read_tokens(run.val_data, tokenizer.get()),
                                                       run.val_data + encoded);
    } else {  // the last tenth is held out for evaluation
      const size_t cut = tokens.size() - tokens.size() / 10;
      std::vector<uint16_t> tail(tokens.begin() + static_cast<std::ptrdiff_t>(cut), tokens.end());
      tokens.resize(cut);
      d.heldout = std::make_shared<data::TokenDataset>(std::move(tail), run.data + encoded + " (held-out tail)");
    }
    d.train = std::make_shared<data::TokenDataset>(std::move(tokens), run.data + encoded);
  }
  for (const auto& set : {d.train, d.heldout}) {
    if (set->vocab_size() <= run.model.vocab) continue;
    throw UserError(set->describe() + " has token ids up to " + std::to_string(set->vocab_size() - 1) +
                    " but the model vocabulary is " + std::to_string(run.model.vocab) + "; pass --vocab " +
                    std::to_string(set->vocab_size()) + " or larger");
  }
  return d;
}

}  // namespace shardlab::runtime
