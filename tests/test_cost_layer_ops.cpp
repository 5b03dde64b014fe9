// The chapter "transformers" per-layer table (transformers.md of jax-ml/scaling-book,
// "Counting parameters and FLOPs" and "What Should You Take Away") behind `shardlab-plan
// model --per-layer` (parallel/cost/model/layer_matmuls.h), as tables (tests/book_figure.h).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "parallel/cost/model/layer_matmuls.h"
#include "tests/book_figure.h"

using namespace shardlab::cost;
using shardlab::test::check;
using shardlab::test::kExact;

namespace {

// Each group's (params, training FLOPs per token) summed over its rows.
std::map<std::string, std::pair<double, double>> sums(const TransformerShape& s) {
  std::map<std::string, std::pair<double, double>> g;
  for (const LayerOp& op : layer_ops(s)) g[op.group].first += op.params, g[op.group].second += op.train_flops_per_token;
  return g;
}

}  // namespace

TEST_CASE("the per-layer table's sums are the chapter's closed forms (transformers.md)") {
  // Question 1's model: D = 4096, F = 4D, N H = D (MHA), V = 32000, L = 64, here at T = 8D.
  TransformerShape s{.name = "q1", .layers = 64, .d_model = 4096, .d_ff = 16384, .heads = 32, .kv_heads = 32,
                     .head_dim = 128, .vocab = 32000, .context = 8 * 4096};
  const double d = 4096, f = 16384, nh = 4096, t = 8 * 4096, v = 32000;
  auto g = sums(s);
  const char* table = "transformers.md, What Should You Take Away (summary table)";
  check({
      {table, "MLP params per layer 3DF", g["mlp"].first, 3 * d * f, kExact},
      {table, "MLP training FLOPs 18BTDF (per token: 18DF)", g["mlp"].second, 18 * d * f, kExact},
      {table, "attention params per layer 4DNH", g["attention"].first, 4 * d * nh, kExact},
      {table, "attention training FLOPs 24BTDNH", g["attention"].second, 24 * d * nh, kExact},
      {table, "dot-product attention 12BT^2NH (per token 12TNH)", g["dot-product attention"].second, 12 * t * nh,
       kExact},
      // The summary table's "12BTDV" for the vocab is the book's slip: its own "Other
      // Operations" table (and the 6N rule it cites) gives the unembedding 6BTDV.
      {"transformers.md, Other Operations", "unembedding 6BTDV (summary table: 12BTDV)", g["vocab"].second,
       6 * d * v, kExact},
      {"transformers.md, Other Operations", "unembedding params DV", g["vocab"].first, d * v, kExact},
      // F = 4D, D = NH: attention / matmul FLOPs = T / 8D, 1 at T = 8D.
      {"transformers.md, Fractional cost of attention", "T = 8D: dot-product attention = the matmuls",
       g["dot-product attention"].second / (g["mlp"].second + g["attention"].second), 1, kExact},
  });
}

TEST_CASE("grouped-query attention and MoE rows") {
  const TransformerShape llama = model_preset("llama3-70b");
  const auto ops = layer_ops(llama);
  double k_params = 0;
  for (const LayerOp& op : ops)
    if (op.name == "W_K") k_params = op.params;
  CHECK(k_params == 8192.0 * 8 * 128);  // D K H with K = 8 < N = 64
  const TransformerShape mixtral = model_preset("mixtral-8x7b");
  for (const LayerOp& op : layer_ops(mixtral))
    if (op.group == "mlp") {
      CHECK(op.params == doctest::Approx(8.0 * 4096 * 14336).epsilon(1e-12).scale(0));  // E copies
      CHECK(op.train_flops_per_token == doctest::Approx(2 * 6.0 * 4096 * 14336).epsilon(1e-12).scale(0));  // k run
    }
}
