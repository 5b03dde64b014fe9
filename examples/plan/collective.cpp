#include "examples/plan/collective.h"

#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "examples/plan/args.h"
#include "examples/plan/network.h"
#include "framework/error.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/network/fat_tree.h"

namespace shardlab::plan {

using namespace shardlab::cost;

void add_collective_flags(cxxopts::Options& o) {
  o.add_options()("op", "all_gather|reduce_scatter|all_reduce|all_to_all, or send (point to point)",
                  cxxopts::value<std::string>()->default_value("all_gather"))
      ("bytes", "V: the whole array (send: the message)", cxxopts::value<std::string>()->default_value("8M"))
      ("mesh", "axis sizes, e.g. 4x4x4", cxxopts::value<std::string>()->default_value("4"))
      ("axes", "0-based axes to run over (default all)", cxxopts::value<std::string>())
      ("wraparound", "on|off (default: the hardware's rule)", cxxopts::value<std::string>())
      ("unidirectional", "use one direction of each link")
      ("nonzero", "all_to_all: k, the non-zero blocks of each shard's N (an MoE's top-k): the ragged all_to_all",
       cxxopts::value<int>())
      ("from", "send: the source chip's coordinates, e.g. 0,0 (default the origin)", cxxopts::value<std::string>())
      ("to", "send: the destination chip's coordinates, e.g. 3,3", cxxopts::value<std::string>());
}

namespace {

// 0.5 -> "0.5", 1.75 -> "1.75": a multiple of V to three significant digits.
std::string fraction(double x) {
  std::ostringstream out;
  out << std::setprecision(3) << x;
  return out.str();
}

// --wraparound on|off, or the hardware's rule when not given.
std::vector<RingAxis> ring_axes(const cxxopts::ParseResult& a, const std::vector<int>& sizes, const HardwareProfile& hw) {
  std::vector<RingAxis> axes;
  const std::string w = a.count("wraparound") ? a["wraparound"].as<std::string>() : "";
  if (!w.empty() && w != "on" && w != "off") throw UserError("--wraparound must be on or off, got '" + w + "'");
  for (int s : sizes) axes.push_back({s, w.empty() ? hw.axis_wraps(s) : w == "on"});
  return axes;
}

int send(const cxxopts::ParseResult& a, const HardwareProfile& hw, double bytes, const std::vector<int>& mesh) {
  if (!a.count("to")) throw UserError("--op send needs --to, the destination chip's coordinates, e.g. 3,3");
  const std::vector<int> to = parse_list(a["to"].as<std::string>(), ',', "to");
  const std::vector<int> from =
      a.count("from") ? parse_list(a["from"].as<std::string>(), ',', "from") : std::vector<int>(mesh.size(), 0);
  const TransferCost t = hw.interconnect == Interconnect::kTorus
                             ? torus_transfer(bytes, ring_axes(a, mesh, hw), from, to, hw.ici)
                             : transfer_cost(bytes, mesh, from, to, hw);
  const double threshold = latency_bound_bytes(t.first_byte_seconds, t.bandwidth_seconds, bytes);
  const LinkSpec link = t.path == "infiniband" ? hw.dcn : hw.ici;
  emit(a,
       Json{{"hw", hw.name}, {"op", "send"}, {"bytes", bytes}, {"mesh", mesh}, {"from", from}, {"to", to},
            {"hops", t.hops}, {"links", t.links}, {"seconds", t.seconds}, {"first_byte_seconds", t.first_byte_seconds},
            {"bandwidth_seconds", t.bandwidth_seconds}, {"path", t.path}, {"latency_bound_bytes", threshold}},
       "send of " + human(bytes, "B") + " on " + hw.name + " from " + coordinates(from) + " to " + coordinates(to) +
           " over " + t.path + ": " + human(t.seconds, "s") + "\n  first byte after " + std::to_string(t.hops) +
           " hops x " + human(link.latency, "s") + " = " + human(t.first_byte_seconds, "s") + ", then " +
           human(bytes, "B") + " over " + std::to_string(t.links) + " link(s) x " + human(link.bandwidth, "B/s") +
           " = " + human(t.bandwidth_seconds, "s") + "\n  latency-bound below " + human(threshold, "B") + "\n");
  return 0;
}

}  // namespace

int cmd_collective(const cxxopts::ParseResult& a) {
  const HardwareProfile hw = hardware_from(a);
  const CollectiveOp op = parallel::parse_collective_op(a["op"].as<std::string>());
  const double bytes = parse_size(a["bytes"].as<std::string>(), "bytes");
  const std::vector<int> mesh = parse_list(a["mesh"].as<std::string>(), 'x', "mesh");
  if (op == CollectiveOp::kSend) return send(a, hw, bytes, mesh);
  if (op == CollectiveOp::kRecv || op == CollectiveOp::kPermute)
    throw UserError("--op " + to_string(op) + " is priced as --op send (one chip to another): give --op send --to ...");
  std::vector<int> chosen;
  if (a.count("axes")) {
    for (int i : parse_list(a["axes"].as<std::string>(), ',', "axes")) {
      if (i >= static_cast<int>(mesh.size()))
        throw UserError("--axes names axis " + std::to_string(i) + " but --mesh " + a["mesh"].as<std::string>() +
                        " has " + std::to_string(mesh.size()) + " axes (0-based)");
      chosen.push_back(mesh[i]);
    }
  } else {
    chosen = mesh;
  }
  const bool bidirectional = !a.count("unidirectional");
  const CollectiveCost c = a.count("wraparound") && hw.interconnect == Interconnect::kTorus
                               ? torus_collective(op, bytes, ring_axes(a, chosen, hw), hw.ici, bidirectional)
                               : collective_cost(op, bytes, chosen, hw, bidirectional);
  const double threshold = latency_bound_bytes(c.latency_seconds, c.bandwidth_seconds, bytes);
  // Bytes over the busiest link, one direction (torus ICI) or one GPU's NVLink egress:
  // what bandwidth_seconds prices. Paths over two kinds of link have no single figure.
  const bool one_link = c.path == "ici" || c.path == "nvlink";
  const double link_bytes = c.bandwidth_seconds * hw.ici.bandwidth;
  Json sizes = Json::array();
  for (int s : chosen) sizes.push_back(s);
  Json json = Json{{"hw", hw.name}, {"op", to_string(op)}, {"bytes", bytes}, {"axis_sizes", sizes},
                         {"bidirectional", bidirectional}, {"seconds", c.seconds},
                         {"bandwidth_seconds", c.bandwidth_seconds}, {"latency_seconds", c.latency_seconds},
                         {"hops", c.hops}, {"latency_bound", c.latency_bound}, {"latency_bound_bytes", threshold},
                         {"path", c.path},
                         {"per_link_bytes", one_link ? Json(link_bytes) : Json(nullptr)}};
  std::string text = to_string(op) + " of " + human(bytes, "B") + " on " + hw.name + " over " + c.path + ": " +
                     human(c.seconds, "s") + "\n  " + (c.latency_bound ? "latency-bound: " : "bandwidth-bound: ") +
                     std::to_string(c.hops) + " hops x " + human(hw.ici.latency, "s") + " = " +
                     human(c.latency_seconds, "s") + " vs bytes/bandwidth " + human(c.bandwidth_seconds, "s") +
                     "\n  latency-bound below V = " + human(threshold, "B") + "\n" +
                     (one_link ? (c.path == "ici" ? "  per link: " : "  per GPU: ") + human(link_bytes, "B") + " (" +
                                     fraction(link_bytes / bytes) + " V) " +
                                     (c.path == "ici" ? "each direction at " : "out over NVLink at ") +
                                     human(hw.ici.bandwidth, "B/s") + "\n"
                               : std::string());
  int gpus = 1;  // the group's size
  for (int s : chosen) gpus *= s;
  if (a.count("nonzero")) {
    if (op != CollectiveOp::kAllToAll) throw UserError("--nonzero prices a ragged all_to_all; give --op all_to_all");
    const int k = a["nonzero"].as<int>();
    const CollectiveCost ragged = ragged_all_to_all(c, k, gpus);
    text += "  ragged, " + std::to_string(k) + " of " + std::to_string(gpus) + " blocks non-zero per shard: " +
            human(ragged.seconds, "s") + " (" + fraction(ragged.bandwidth_seconds / c.bandwidth_seconds) +
            " of the bytes)\n";
    json.update(Json{{"nonzero", k}, {"ragged_seconds", ragged.seconds}});
  }
  // A group spanning whole nodes runs on the fat tree: the bytes through one switch of each
  // level, as `network` prints them.
  if (spans_whole_nodes(op, gpus, 1, hw)) {
    const GpuCollective tree = fat_tree_collective(fat_tree_for(hw, gpus), op, bytes, gpus);
    text += switch_bytes_line(tree);
    json["fat_tree_levels"] = levels_json(tree);
  }
  emit(a, json, text);
  return 0;
}

}  // namespace shardlab::plan
