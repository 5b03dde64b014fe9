#include "examples/plan/matmul_cases.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace shardlab::plan {

using namespace shardlab::cost;

namespace {

Json case_json(const MatmulCase& c) {
  return Json{{"case", c.number}, {"layout", c.layout}, {"action", c.action},
              {"collective", c.communicates ? Json(to_string(c.op)) : Json(nullptr)},
              {"moved", c.moved}, {"comm_bytes", c.comm_bytes}, {"t_comms_s", c.t_comms_s},
              {"flops_per_chip", c.flops_per_chip}, {"t_math_s", c.t_math_s},
              {"time_lower_s", c.time_lower_s}, {"time_upper_s", c.time_upper_s}};
}

// "AllGather X over D, then multiply whole: all_gather of X[B, D] (134 MB) 1.49 ms, T_math
// 5.58 ms (1.1 TFLOP per chip); time between 5.58 ms and 7.07 ms"
std::string case_line(const MatmulCase& c) {
  return c.action + ": " +
         (c.communicates ? to_string(c.op) + " of " + c.moved + " (" + human(c.comm_bytes, "B") + ") " +
                               human(c.t_comms_s, "s") + ", "
                         : std::string("no communication, ")) +
         "T_math " + human(c.t_math_s, "s") + " (" + human(c.flops_per_chip, "FLOP") + " per chip); time between " +
         human(c.time_lower_s, "s") + " and " + human(c.time_upper_s, "s") + "\n";
}

}  // namespace

std::string matmul_cases_text(int shards, const MatmulSpec& m, const HardwareProfile& hw, Json& json) {
  Json rows = Json::array();
  std::string text = "X[B,D] . W[D,F] sharded over one axis X of " + std::to_string(shards) + " chips on " + hw.name + ":\n";
  for (const MatmulCase& c : sharded_matmul_cases(m, shards, hw)) {
    rows.push_back(case_json(c));
    text += "  case " + std::to_string(c.number) + ": " + c.layout + "\n    " + case_line(c);
  }
  json.update(Json{{"cases_shards", shards}, {"cases", rows}});
  return text;
}

std::string gather_or_reduce_text(int shards, ShardedOperand sharded, const MatmulSpec& m, const HardwareProfile& hw,
                                  Json& json) {
  const GatherOrReduce g = gather_or_reduce(m, shards, sharded, hw);
  const bool weight = sharded == ShardedOperand::kWeight;
  const std::string x = std::to_string(shards);
  std::string text = g.layout + ", only " + (weight ? "W" : "X") + " sharded on the contracting D, over one axis X of " +
                     x + " chips on " + hw.name + " (B=" + std::to_string(m.b) + ", D=" + std::to_string(m.d) +
                     ", F=" + std::to_string(m.f) + "):\n";
  text += "  gather:         " + case_line(g.gather);
  text += "  all_reduce:     " + case_line(g.all_reduce);
  text += "  reduce_scatter: " + case_line(g.reduce_scatter);
  std::vector<std::pair<double, std::string>> order = {{g.gather.time_lower_s, "gather"},
                                                        {g.all_reduce.time_lower_s, "all_reduce"},
                                                        {g.reduce_scatter.time_lower_s, "reduce_scatter"}};
  std::stable_sort(order.begin(), order.end());
  text += "  fastest first, overlapped:";
  for (size_t i = 0; i < order.size(); ++i) text += (i ? ", " : " ") + order[i].second + " " + human(order[i].first, "s");
  text += "\n";
  const std::string free_dim = weight ? "2B" : "2F";
  text += "  the shards' multiply covers its AllReduce iff D > " + human(g.reduce_compute_bound_d, "") +
          " (2 X C / W_ici: X < D / " + human(g.reduce_compute_bound_d / shards, "") + ")\n";
  text += "  the AllReduce takes less than the gather's whole multiply iff D > " +
          human(g.all_reduce_under_whole_math_d, "") + " (2 C / W_ici)\n";
  text += "  the AllReduce moves less than the AllGather iff D > " + human(g.all_reduce_moves_less_d, "") + " (" +
          free_dim + "); the ReduceScatter iff D > " + human(g.reduce_scatter_moves_less_d, "") + " (" +
          free_dim.substr(1) + ")\n";
  json.update(Json{{"gather_or_reduce",
                    Json{{"shards", shards}, {"sharded", weight ? "w" : "x"}, {"layout", g.layout},
                         {"gather", case_json(g.gather)}, {"all_reduce", case_json(g.all_reduce)},
                         {"reduce_scatter", case_json(g.reduce_scatter)},
                         {"reduce_compute_bound_d", g.reduce_compute_bound_d},
                         {"all_reduce_under_whole_math_d", g.all_reduce_under_whole_math_d},
                         {"all_reduce_moves_less_d", g.all_reduce_moves_less_d},
                         {"reduce_scatter_moves_less_d", g.reduce_scatter_moves_less_d}}}});
  return text;
}

}  // namespace shardlab::plan
