// Token sampling (parallel/runtime/sampling.h) on a known distribution: greedy takes the
// argmax; temperature 1 draws each token at its softmax probability; top_k and top_p
// (nucleus) keep only the most likely tokens and renormalise among them.
#include <doctest/doctest.h>

#include <array>
#include <cmath>

#include "parallel/runtime/sampling.h"

using namespace shardlab;

namespace {

constexpr std::array<double, 4> kProbabilities = {0.15, 0.5, 0.05, 0.3};  // token 1 most likely, then 3, 0, 2

// The share of `draws` samples that picked each of the 4 tokens.
std::array<double, 4> frequencies(const runtime::SampleOptions& options, int draws = 40000) {
  std::array<float, 4> logits;
  for (size_t v = 0; v < logits.size(); ++v) logits[v] = static_cast<float>(std::log(kProbabilities[v]) + 3.0);
  std::array<int, 4> counts{};
  for (int d = 0; d < draws; ++d) ++counts[runtime::pick_token(logits, options, d)];
  std::array<double, 4> shares;
  for (size_t v = 0; v < shares.size(); ++v) shares[v] = static_cast<double>(counts[v]) / draws;
  return shares;
}

// Each frequency within 0.015 of the expected (over 4 standard deviations at 40000 draws).
void check_frequencies(const std::array<double, 4>& got, const std::array<double, 4>& expected) {
  for (size_t v = 0; v < got.size(); ++v) {
    INFO("token " << v);
    CHECK(std::abs(got[v] - expected[v]) < 0.015);
    if (expected[v] == 0.0) CHECK(got[v] == 0.0);
  }
}

}  // namespace

TEST_CASE("greedy takes the argmax; temperature 1 draws at the softmax probabilities") {
  CHECK(frequencies({.temperature = 0.0f})[1] == 1.0);
  check_frequencies(frequencies({.temperature = 1.0f}), kProbabilities);
}

TEST_CASE("top_k keeps the k most likely tokens, renormalised") {
  check_frequencies(frequencies({.temperature = 1.0f, .top_k = 1}), {0, 1, 0, 0});
  check_frequencies(frequencies({.temperature = 1.0f, .top_k = 2}), {0, 0.5 / 0.8, 0, 0.3 / 0.8});
}

TEST_CASE("top_p keeps the fewest most likely tokens whose probabilities reach p") {
  // 0.5 < 0.7 <= 0.5 + 0.3: tokens 1 and 3.
  check_frequencies(frequencies({.temperature = 1.0f, .top_p = 0.7f}), {0, 0.5 / 0.8, 0, 0.3 / 0.8});
  // 0.8 < 0.9 <= 0.95: tokens 1, 3 and 0.
  check_frequencies(frequencies({.temperature = 1.0f, .top_p = 0.9f}), {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95});
  // Below the most likely token's probability: that token alone.
  check_frequencies(frequencies({.temperature = 1.0f, .top_p = 0.2f}), {0, 1, 0, 0});
  // After top_k 2 the nucleus is taken of the two kept (0.5/0.8 = 0.625 >= 0.6): token 1 only.
  check_frequencies(frequencies({.temperature = 1.0f, .top_k = 2, .top_p = 0.6f}), {0, 1, 0, 0});
}
