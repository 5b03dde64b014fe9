#include "parallel/runtime/data_source.h"

#include "framework/data/token_files.h"
#include "framework/error.h"

namespace shardlab::runtime {

DataSource open_data(const RunConfig& run) {
  DataSource d;
  if (run.data == "arithmetic") {
    d.task.emplace(data::ArithmeticConfig{.digits = run.digits, .seed = run.seed});
    d.train = d.task->train();
    d.heldout = d.task->heldout();
  } else {
    std::vector<uint16_t> tokens = data::read_token_files(run.data);
    if (!run.val_data.empty()) {
      d.heldout = std::make_shared<data::TokenDataset>(data::read_token_files(run.val_data), run.val_data);
    } else {  // the last tenth is held out for evaluation
      const size_t cut = tokens.size() - tokens.size() / 10;
      std::vector<uint16_t> tail(tokens.begin() + static_cast<std::ptrdiff_t>(cut), tokens.end());
      tokens.resize(cut);
      d.heldout = std::make_shared<data::TokenDataset>(std::move(tail), run.data + " (held-out tail)");
    }
    d.train = std::make_shared<data::TokenDataset>(std::move(tokens), run.data);
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
