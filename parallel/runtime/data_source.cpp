#include "parallel/runtime/data_source.h"

#include <tuple>

#include "framework/data/shard_set.h"
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

// llm.c shards (a .bin file or pattern): mapped, never read whole; training rows shuffled
// per epoch unless --shuffle=false, held-out rows in order.
void open_shards(const RunConfig& run, DataSource& d) {
  const data::ShardSetOptions train{.seed = run.seed, .shuffle = run.shuffle, .vocab_limit = run.model.vocab};
  const data::ShardSetOptions heldout{.seed = run.seed, .shuffle = false, .vocab_limit = run.model.vocab};
  auto all = std::make_shared<const data::ShardSet>(run.data, train);
  if (!run.val_data.empty()) {
    d.train = all;
    if (data::is_token_shard(run.val_data)) {
      d.heldout = std::make_shared<const data::ShardSet>(run.val_data, heldout, "--val-data");
    } else {
      d.heldout = std::make_shared<data::TokenDataset>(data::read_token_files(run.val_data), run.val_data);
    }
  } else {  // the last tenth of the tokens is held out for evaluation
    std::tie(d.train, d.heldout) = all->split(all->tokens() - all->tokens() / 10, heldout);
  }
}

}  // namespace

DataSource open_data(const RunConfig& run) {
  DataSource d;
  if (run.data == "arithmetic") {
    d.task.emplace(data::ArithmeticConfig{.digits = run.digits, .seed = run.seed});
    d.train = d.task->train();
    d.heldout = d.task->heldout();
  } else if (data::is_token_shard(run.data)) {
    open_shards(run, d);
  } else {
    std::unique_ptr<text::Tokenizer> tokenizer;
    if (!run.tokenizer.empty()) {
      tokenizer = std::make_unique<text::Tokenizer>(text::read_tokenizer_file(run.tokenizer));
      if (tokenizer->vocab_size() > 65536) {
        throw UserError("--tokenizer " + run.tokenizer + " has " + std::to_string(tokenizer->vocab_size()) +
                        " token ids, but text --data is held as uint16 ids once encoded (at most 65536, GPT-2's "
                        "50257 fit); for LLaMA 3's 128256 write uint32 shards (prepare_data) and train on those");
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
