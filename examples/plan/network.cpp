#include "examples/plan/network.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "examples/plan/args.h"
#include "framework/error.h"
#include "parallel/cost/network/fat_tree.h"

namespace shardlab::plan {

using namespace shardlab::cost;

std::string switch_bytes_line(const GpuCollective& c) {
  std::string text;
  for (size_t i = 0; i < c.levels.size() && c.levels[i].switch_out > 0; ++i) {
    const LevelTime& l = c.levels[i];
    text += std::string(i ? "; " : "  through one switch: ") + l.level + " in " + human(l.switch_in, "B") + ", out " +
            human(l.switch_out, "B") + " (" + std::to_string(l.degree) + " x " + human(l.link_bandwidth, "B/s") +
            ": " + human(std::max(l.switch_in, l.switch_out) / (l.degree * l.link_bandwidth), "s") + ")" +
            (i + 1 == c.levels.size() ? "\n" : "");
  }
  return text;
}

Json levels_json(const GpuCollective& c) {
  Json levels = Json::array();
  for (const LevelTime& l : c.levels) {
    levels.push_back(Json{{"level", l.level}, {"degree", l.degree}, {"seconds", l.seconds},
                          {"switch_in_bytes", l.switch_in}, {"switch_out_bytes", l.switch_out}});
  }
  return levels;
}

void add_network_flags(cxxopts::Options& o) {
  o.add_options("network")
      ("gpus", "GPUs in the collective's group (default: the whole tree)", cxxopts::value<int>())
      ("inner", "Y: an inner axis (neighbouring GPUs) the array is also sharded over", cxxopts::value<int>()->default_value("1"))
      ("op", "all_gather|reduce_scatter|all_reduce|all_to_all", cxxopts::value<std::string>()->default_value("all_gather"))
      ("bytes", "V: the whole array, e.g. 537e6 or 512M (binary)", cxxopts::value<std::string>())
      ("sharp", "all_reduce with SHARP in-network reduction")
      ("sus", "Scalable Units of 32 nodes under the spine (default 4, or enough for --gpus)", cxxopts::value<int>())
      ("oversubscription", "spine uplinks divided by this (1: full bisection)",
       cxxopts::value<double>()->default_value("1"));
}

int cmd_network(const cxxopts::ParseResult& a) {
  const HardwareProfile hw = hardware_from(a);
  const int su_gpus = 32 * hw.node_size;
  const int wanted = a.count("gpus") ? a["gpus"].as<int>() : 0;
  const int sus = a.count("sus") ? a["sus"].as<int>() : std::max(4, (wanted + su_gpus - 1) / su_gpus);
  const FatTree tree = fat_tree(hw, sus, a["oversubscription"].as<double>());
  std::string text = hw.name + " fat tree (DGX SuperPod reference, " + std::to_string(tree.levels.back().gpus()) +
                     " GPUs), node egress " + human(tree.node_egress, "B/s") + "\n  level   GPUs  degree  link/child  per GPU    collective BW\n";
  Json levels = Json::array();
  for (const FatTreeLevel& l : tree.levels) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-6s %5d  %6d  %-10s  %-9s  %s\n", l.name.c_str(), l.gpus(), l.degree,
                  human(l.link_bandwidth, "B/s").c_str(), human(l.per_gpu(), "B/s").c_str(),
                  human(l.collective_bandwidth(), "B/s").c_str());
    text += line;
    levels.push_back(Json{{"level", l.name}, {"gpus", l.gpus()}, {"degree", l.degree}, {"child_gpus", l.child_gpus},
                          {"link_bytes_per_second", l.link_bandwidth}, {"per_gpu_bytes_per_second", l.per_gpu()},
                          {"collective_bytes_per_second", l.collective_bandwidth()}});
  }
  // The switches of each level (fat_tree.h: NVSwitches per node, a leaf per rail per SU, the spine).
  text += "  switches:";
  for (size_t i = 0; i < tree.levels.size(); ++i) {
    const FatTreeLevel& l = tree.levels[i];
    text += std::string(i ? " +" : "") + " " + std::to_string(l.switches) + " " + l.name;
    levels[i]["switches"] = l.switches;
  }
  text += " = " + std::to_string(tree.switches()) + "\n";
  Json json{{"hw", hw.name}, {"node_egress_bytes_per_second", tree.node_egress}, {"levels", levels},
            {"switches", tree.switches()}};
  if (a.count("bytes")) {
    const CollectiveOp op = parallel::parse_collective_op(a["op"].as<std::string>());
    const double bytes = parse_size(a["bytes"].as<std::string>(), "bytes");
    const int gpus = wanted > 0 ? wanted : tree.levels.back().gpus();
    const CollectiveOptions options{.inner = a["inner"].as<int>(), .sharp = a.count("sharp") > 0};
    const GpuCollective c = fat_tree_collective(tree, op, bytes, gpus, options);
    text += to_string(op) + (options.sharp ? " (SHARP)" : "") + " of " + human(bytes, "B") + " over " +
            std::to_string(gpus) + " GPUs" +
            (options.inner > 1 ? " (inner axis " + std::to_string(options.inner) + ")" : std::string()) + ": " +
            human(c.seconds, "s") + ", bound by the " + c.bound_level + " level (" + human(c.bandwidth, "B/s") +
            "); bisection " + human(c.bisection_bandwidth, "B/s") + " both ways\n  ";
    for (size_t i = 0; i < c.levels.size(); ++i) {
      const LevelTime& l = c.levels[i];
      text += (i ? ", " : "") + l.level + " " + std::to_string(l.degree) + "-way " + human(l.seconds, "s");
    }
    text += "\n" + switch_bytes_line(c);
    json["collective"] = Json{{"op", to_string(op)}, {"bytes", bytes}, {"gpus", gpus}, {"inner", options.inner},
                              {"sharp", options.sharp}, {"seconds", c.seconds}, {"bound_level", c.bound_level},
                              {"bytes_per_second", c.bandwidth}, {"bisection_bytes_per_second", c.bisection_bandwidth},
                              {"levels", levels_json(c)}};
  }
  emit(a, json, text);
  return 0;
}

}  // namespace shardlab::plan
