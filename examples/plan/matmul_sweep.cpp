#include "examples/plan/matmul_sweep.h"

#include <cstdio>
#include <sstream>
#include <utility>
#include <vector>

#include "framework/error.h"

namespace shardlab::plan {

using namespace shardlab::cost;

namespace {

// `text` padded on the left to `width`.
std::string column(const std::string& text, size_t width) {
  return text.size() >= width ? " " + text : std::string(width - text.size(), ' ') + text;
}

}  // namespace

std::string matmul_sweep(const std::string& shapes_text, const MatmulSpec& m, const HardwareProfile& hw, Json& json) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  std::stringstream items(shapes_text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw UserError("--sweep '" + shapes_text + "': '" + item + "' is not D:F; give e.g. --sweep 1024:4096,8192:32768");
    shapes.emplace_back(parse_count(item.substr(0, colon), "sweep D"), parse_count(item.substr(colon + 1), "sweep F"));
  }
  if (shapes.empty()) throw UserError("--sweep needs at least one D:F, e.g. --sweep 8192:32768");
  if (m.b < 1) throw UserError("--batch " + std::to_string(m.b) + ": the sweep runs B = 1, 2, 4, ... up to it; give >= 1");
  const double peak = peak_flops(hw, compute_dtype(m.x, m.w));
  constexpr size_t kWidth = 24;
  std::string text = "X[B,D] . W[D,F] on " + hw.name + " (" + to_string(m.x) + " x " + to_string(m.w) +
                     " weights): FLOP/s reached (share of the " + human(peak, "FLOP/s") + " peak) against B\n" +
                     column("B", 8);
  for (const auto& [d, f] : shapes) text += column("D=" + std::to_string(d) + " F=" + std::to_string(f), kWidth);
  text += "\n";
  Json rows = Json::array();
  for (int64_t b = 1; b <= m.b; b *= 2) {
    text += column(std::to_string(b), 8);
    Json row{{"b", b}, {"points", Json::array()}};
    for (const auto& [d, f] : shapes) {
      MatmulSpec x = m;
      x.b = b, x.d = d, x.f = f;
      const Roofline r = matmul_roofline(x, hw);
      char share[16];
      std::snprintf(share, sizeof share, "%.0f%%", 100 * r.achieved_flops / peak);
      text += column(human(r.achieved_flops, "FLOP/s") + " (" + share + ")", kWidth);
      row["points"].push_back(Json{{"d", d}, {"f", f}, {"flops_per_second", r.achieved_flops},
                                   {"fraction_of_peak", r.achieved_flops / peak}, {"compute_bound", r.compute_bound}});
    }
    text += "\n";
    rows.push_back(row);
  }
  json["peak_flops_per_second"] = peak;
  json["sweep"] = rows;
  return text;
}

}  // namespace shardlab::plan
