#include "framework/data/arithmetic.h"

#include <algorithm>
#include <limits>

#include "framework/error.h"
#include "framework/rng.h"

namespace shardlab::data {
namespace {

// Streams of the counter-based Rng; the split key is fixed so the held-out set does not
// move with the seed.
constexpr uint64_t kTrainStream = 1, kHeldoutStream = 2, kEvalStream = 3;
constexpr uint64_t kSplitKey = 0x5eed5a17c0ffee00ULL;
constexpr int kHeldoutOneIn = 10;
constexpr int kEvalShots = 3;

int64_t pow10(int digits) {
  int64_t p = 1;
  for (int i = 0; i < digits; ++i) p *= 10;
  return p;
}

std::string padded(int64_t value, int width) {
  std::string s = std::to_string(value);
  return std::string(width - static_cast<int>(s.size()), '0') + s;
}

struct Problem {
  int64_t a, b;
};

std::string problem_prompt(const ArithmeticConfig& config, Problem p) {
  return padded(p.a, config.digits) + "+" + padded(p.b, config.digits) + "=";
}

std::string problem_answer(const ArithmeticConfig& config, Problem p) {
  std::string sum = padded(p.a + p.b, config.digits + 1);
  std::reverse(sum.begin(), sum.end());
  return sum + "\n";
}

std::string problem_text(const ArithmeticConfig& config, Problem p) {
  return problem_prompt(config, p) + problem_answer(config, p);
}

bool problem_heldout(const ArithmeticConfig& config, Problem p) {
  const uint64_t pair = static_cast<uint64_t>(std::min(p.a, p.b) * pow10(config.digits) + std::max(p.a, p.b));
  return Rng(kSplitKey).bits(0, pair) % kHeldoutOneIn == 0;
}

// Draws problems of one split of the task from a keyed stream.
class ProblemSource {
 public:
  ProblemSource(const ArithmeticConfig& config, bool heldout, uint64_t stream)
      : config_(config), heldout_(heldout), rng_(config.seed), stream_(stream),
        range_(static_cast<uint64_t>(pow10(config.digits))) {}

  Problem next() {
    for (;;) {
      const auto a = static_cast<int64_t>(rng_.bits(stream_, drawn_++) % range_);
      const auto b = static_cast<int64_t>(rng_.bits(stream_, drawn_++) % range_);
      if (problem_heldout(config_, {a, b}) == heldout_) return {a, b};
    }
  }

 private:
  ArithmeticConfig config_;
  bool heldout_;
  Rng rng_;
  uint64_t stream_;
  uint64_t drawn_ = 0;
  uint64_t range_;
};

// One split as a Dataset: row i packs problems drawn from the stream keyed by (seed, split, i).
class ArithmeticSplit : public Dataset {
 public:
  ArithmeticSplit(const ArithmeticConfig& config, bool heldout) : config_(config), heldout_(heldout) {}

  void read_row(int64_t index, std::span<int32_t> tokens) const override {
    const uint64_t row_stream = Rng(config_.seed).bits(heldout_ ? kHeldoutStream : kTrainStream, index);
    ProblemSource source(config_, heldout_, row_stream);
    size_t filled = 0;
    while (filled < tokens.size()) {
      const std::string text = problem_text(config_, source.next());
      const size_t n = std::min(text.size(), tokens.size() - filled);
      std::copy(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(n), tokens.begin() + filled);
      filled += n;
    }
  }

  int64_t max_row_length() const override { return std::numeric_limits<int64_t>::max(); }
  int vocab_size() const override { return 256; }

  std::string describe() const override {
    return std::string("arithmetic ") + (heldout_ ? "held-out" : "train") + " split (" +
           std::to_string(config_.digits) + "-digit addition, reversed answers, seed " +
           std::to_string(config_.seed) + ")";
  }

 private:
  ArithmeticConfig config_;
  bool heldout_;
};

std::vector<int> to_tokens(const std::string& text) {
  return std::vector<int>(reinterpret_cast<const unsigned char*>(text.data()),
                          reinterpret_cast<const unsigned char*>(text.data()) + text.size());
}

}  // namespace

ArithmeticTask::ArithmeticTask(ArithmeticConfig config) : config_(config) {
  if (config.digits < 1 || config.digits > 9) {
    throw UserError("arithmetic task with " + std::to_string(config.digits) +
                    " digits: choose between 1 and 9 operand digits");
  }
  train_ = std::make_shared<ArithmeticSplit>(config_, false);
  heldout_ = std::make_shared<ArithmeticSplit>(config_, true);
}

std::string ArithmeticTask::prompt_text(int64_t a, int64_t b) const { return problem_prompt(config_, {a, b}); }
std::string ArithmeticTask::answer_text(int64_t a, int64_t b) const { return problem_answer(config_, {a, b}); }
bool ArithmeticTask::is_heldout(int64_t a, int64_t b) const { return problem_heldout(config_, {a, b}); }

TaskScore ArithmeticTask::evaluate(const GreedyComplete& complete, int64_t problems) const {
  ProblemSource source(config_, true, kEvalStream);
  std::vector<Problem> window;
  for (int i = 0; i < kEvalShots; ++i) window.push_back(source.next());
  TaskScore score;
  for (int64_t i = 0; i < problems; ++i) {
    const Problem query = source.next();
    std::string prompt;
    for (const Problem& shot : window) prompt += problem_text(config_, shot);
    prompt += problem_prompt(config_, query);
    const std::string expected = problem_answer(config_, query);
    const std::vector<int> got = complete(to_tokens(prompt), static_cast<int>(expected.size()));
    score.correct += got == to_tokens(expected) ? 1 : 0;
    score.total += 1;
    window.erase(window.begin());
    window.push_back(query);
  }
  return score;
}

}  // namespace shardlab::data
