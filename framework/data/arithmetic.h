// The embedded default data set: addition problems written as byte text.
//
// Each problem is "a+b=c\n" with a, b zero-padded to `digits` digits and the sum c
// written with digits + 1 digits in REVERSED order (least significant first), e.g. with
// digits = 2:  "07+45=250\n"  (07 + 45 = 052, reversed "250").  Reversed answers let a
// small causal model produce each digit after the carry that decides it (the usual
// trick of Lee et al., "Teaching Arithmetic to Small Transformers", 2023).
//
// Problems are split by the unordered pair {a, b}: about 1 in 10 pairs belongs to the
// held-out split, the rest to train, so a held-out problem (nor its mirror b+a) never
// appears in training. The split does not depend on the seed; the streams do.
// Each data-set row starts at a problem boundary and packs problems until it is full.
//
// The task metric is exact-match accuracy on held-out problems: the prompt is a few
// solved held-out problems followed by "a+b=", and the model must greedily produce the
// reversed answer digits then "\n". The data module knows nothing of models: the caller
// passes a greedy completion function.
//
//   data::ArithmeticTask task({.digits = 2, .seed = 1234});
//   data::BatchLoader train(task.train(), 8, 256);
//   data::TaskScore s = task.evaluate(greedy, 200);   // s.accuracy() in [0, 1]
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/data/dataset.h"

namespace shardlab::data {

struct ArithmeticConfig {
  int digits = 2;      // operand digits, 1..9
  uint64_t seed = 0;   // selects the train and held-out streams
};

// Returns the tokens generated after `prompt` (at most max_new), greedily.
using GreedyComplete = std::function<std::vector<int>(const std::vector<int>& prompt, int max_new)>;

struct TaskScore {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const { return total ? static_cast<double>(correct) / total : 0.0; }
};

class ArithmeticTask {
 public:
  explicit ArithmeticTask(ArithmeticConfig config);  // UserError on digits outside 1..9

  std::shared_ptr<const Dataset> train() const { return train_; }
  std::shared_ptr<const Dataset> heldout() const { return heldout_; }

  // Exact-match accuracy over the first `problems` held-out problems (always the same
  // ones for a given seed, so evals are comparable across steps and runs).
  TaskScore evaluate(const GreedyComplete& complete, int64_t problems) const;

  // "a+b=" and its expected completion "c\n" (reversed c) as text; exposed for tests/docs.
  std::string prompt_text(int64_t a, int64_t b) const;
  std::string answer_text(int64_t a, int64_t b) const;
  bool is_heldout(int64_t a, int64_t b) const;
  const ArithmeticConfig& config() const { return config_; }

 private:
  ArithmeticConfig config_;
  std::shared_ptr<const Dataset> train_;
  std::shared_ptr<const Dataset> heldout_;
};

}  // namespace shardlab::data
