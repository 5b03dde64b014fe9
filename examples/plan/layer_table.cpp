#include "examples/plan/layer_table.h"

#include <cstdio>
#include <map>

#include "examples/plan/args.h"
#include "parallel/cost/model/layer_matmuls.h"

namespace shardlab::plan {

using namespace shardlab::cost;

int print_layer_table(const cxxopts::ParseResult& a, const TransformerShape& s) {
  const std::vector<LayerOp> ops = layer_ops(s);
  Json rows = Json::array();
  std::string text = s.describe() + "\n  per layer (training FLOPs = 6 per parameter and token for a matmul; x B T tokens for a step)\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-22s %-13s %-30s %10s %16s\n", "group", "op", "einsum", "params",
                "train FLOP/token");
  text += line;
  std::map<std::string, std::pair<double, double>> sums;  // group -> (params, FLOPs)
  std::vector<std::string> order;
  double layer_flops = 0, vocab_flops = 0;
  for (const LayerOp& op : ops) {
    rows.push_back(Json{{"group", op.group}, {"op", op.name}, {"einsum", op.einsum}, {"params", op.params},
                        {"train_flops_per_token", op.train_flops_per_token}, {"per_layer", op.per_layer}});
    std::snprintf(line, sizeof line, "  %-22s %-13s %-30s %10s %16s\n", op.group.c_str(), op.name.c_str(),
                  op.einsum.c_str(), human(op.params, "").c_str(), human(op.train_flops_per_token, "FLOP").c_str());
    text += line;
    if (!sums.count(op.group)) order.push_back(op.group);
    sums[op.group].first += op.params, sums[op.group].second += op.train_flops_per_token;
    (op.per_layer ? layer_flops : vocab_flops) += op.train_flops_per_token;
  }
  Json groups = Json::object();
  text += "  sums:";
  for (const std::string& g : order) {
    groups[g] = Json{{"params", sums[g].first}, {"train_flops_per_token", sums[g].second}};
    text += " " + g + " " + human(sums[g].first, "") + " params, " + human(sums[g].second, "FLOP") + "/token;";
  }
  const double total = layer_flops * s.layers + vocab_flops;
  text.back() = '\n';
  text += "  model: " + std::to_string(s.layers) + " layers x " + human(layer_flops, "FLOP") + " + vocab " +
          human(vocab_flops, "FLOP") + " = " + human(total, "FLOP") + " per token (T=" + std::to_string(s.context) +
          ")\n";
  emit(a, Json{{"model", s.describe()}, {"context", s.context}, {"ops", rows}, {"groups", groups},
               {"layer_train_flops_per_token", layer_flops}, {"train_flops_per_token", total}},
       text);
  return 0;
}

}  // namespace shardlab::plan
