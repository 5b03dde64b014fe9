#include "examples/plan/array.h"

#include <sstream>
#include <string>
#include <vector>

#include "examples/plan/args.h"
#include "parallel/cost/sharding/sharded_array.h"

namespace shardlab::plan {

using namespace shardlab::cost;

void add_array_flags(cxxopts::Options& o) {
  o.add_options()("shape", "global shape, e.g. 4096,8192 (sizes take K/M suffixes)",
                  cxxopts::value<std::string>()->default_value("4096,8192"))
      ("spec", "per dimension the mesh axes it is split over, e.g. X,Y or XY, (empty: replicated)",
       cxxopts::value<std::string>()->default_value("X,Y"))
      ("mesh", "named mesh axes, e.g. X=4,Y=8", cxxopts::value<std::string>()->default_value("X=4,Y=8"))
      ("dtype", "element type: fp32, bf16, fp8, int8, int4", cxxopts::value<std::string>()->default_value("bf16"));
}

int cmd_array(const cxxopts::ParseResult& a) {
  std::vector<int64_t> shape;
  std::stringstream dims_text(a["shape"].as<std::string>());
  for (std::string dim; std::getline(dims_text, dim, ',');) shape.push_back(parse_count(dim, "shape"));
  const NamedMesh mesh = parse_named_mesh(a["mesh"].as<std::string>());
  const DType dtype = parse_dtype(a["dtype"].as<std::string>());
  const ShardedArray s = shard_array(shape, a["spec"].as<std::string>(), mesh, bytes_of(dtype));
  const auto dims = [&](const std::vector<int64_t>& v) {
    std::string out = to_string(dtype) + "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return out + "]";
  };
  std::string text = s.describe() + " " + dims(s.global) + " on mesh " + a["mesh"].as<std::string>() + " (" +
                     std::to_string(mesh.devices()) + " devices): local " + dims(s.local) +
                     (s.padded ? " (padded: a dimension does not divide)" : "") + ", " +
                     human(s.bytes_per_device, "B") + " per device, replicated " + std::to_string(s.replication) +
                     "x, " + human(s.total_bytes, "B") + " over the mesh\n";
  Json json{{"array", s.describe()}, {"dtype", to_string(dtype)}, {"global", s.global}, {"local", s.local},
            {"devices", mesh.devices()}, {"padded", s.padded}, {"replication", s.replication},
            {"bytes_per_device", s.bytes_per_device}, {"total_bytes", s.total_bytes}};
  if (a.count("hw")) {  // asked on a chip: the shard's read from HBM
    const HardwareProfile hw = hardware_from(a);
    const double seconds = shard_read_seconds(s, hw);
    text += "  each device reads its shard from HBM in " + human(seconds, "s") + " on " + hw.name + " (" +
            human(hw.hbm_bandwidth, "B/s") + ")\n";
    json.update(Json{{"hw", hw.name}, {"hbm_read_s", seconds}});
  }
  emit(a, json, text);
  return 0;
}

}  // namespace shardlab::plan
