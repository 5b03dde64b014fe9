#include "parallel/cost/sharding/sharded_array.h"

#include <algorithm>
#include <set>

#include "framework/error.h"

namespace shardlab::cost {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t stop = text.find(separator, start);
    out.push_back(text.substr(start, stop - start));
    if (stop == std::string::npos) return out;
    start = stop + 1;
  }
}

bool has_axis(const NamedMesh& mesh, const std::string& name) {
  return std::any_of(mesh.axes.begin(), mesh.axes.end(), [&](const auto& a) { return a.name == name; });
}

// One dimension's entry: "" / "-" (replicated), "X+Y", or "XY" with one-letter axis names.
std::vector<std::string> axes_of(const std::string& entry, const NamedMesh& mesh) {
  if (entry.empty() || entry == "-") return {};
  if (entry.find('+') != std::string::npos || has_axis(mesh, entry)) return split(entry, '+');
  std::vector<std::string> letters;
  for (char c : entry) letters.emplace_back(1, c);
  const bool all_axes = std::all_of(letters.begin(), letters.end(), [&](const std::string& l) { return has_axis(mesh, l); });
  return all_axes ? letters : std::vector<std::string>{entry};  // an unknown name: reported by the caller
}

}  // namespace

int NamedMesh::devices() const {
  int n = 1;
  for (const auto& [name, size] : axes) n *= size;
  return n;
}

int NamedMesh::size(const std::string& axis) const {
  for (const auto& [name, size] : axes) {
    if (name == axis) return size;
  }
  std::vector<std::string> names;
  for (const auto& [name, size] : axes) names.push_back(name);
  throw UserError("mesh axis '" + axis + "' is not in the mesh (its axes: " + parallel::join_names(names, ", ") + ")");
}

NamedMesh parse_named_mesh(const std::string& text) { return {parallel::parse_axis_sizes(text, {}, "X=4,Y=8")}; }

ShardedArray shard_array(const std::vector<int64_t>& shape, const std::string& spec, const NamedMesh& mesh,
                         double bytes_per_element) {
  const std::vector<std::string> entries = split(spec, ',');
  if (entries.size() != shape.size()) {
    throw UserError("--spec '" + spec + "' has " + std::to_string(entries.size()) + " entries but the array has " +
                    std::to_string(shape.size()) + " dimensions; give one per dimension (empty for replicated)");
  }
  ShardedArray a;
  a.global = shape;
  std::set<std::string> used;
  double elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) throw UserError("--shape dimension " + std::to_string(d) + " is " + std::to_string(shape[d]));
    int64_t ways = 1;
    for (const std::string& axis : axes_of(entries[d], mesh)) {
      ways *= mesh.size(axis);  // UserError for an unknown axis
      if (!used.insert(axis).second) {
        throw UserError("--spec '" + spec + "' uses mesh axis " + axis + " twice; an axis shards one dimension at most");
      }
      a.spec.resize(shape.size());
      a.spec[d].push_back(axis);
    }
    a.spec.resize(shape.size());
    a.local.push_back((shape[d] + ways - 1) / ways);
    a.padded = a.padded || shape[d] % ways != 0;
    elements *= static_cast<double>(a.local.back());
  }
  for (const auto& [name, size] : mesh.axes) {
    if (!used.count(name)) a.replication *= size;
  }
  a.bytes_per_device = elements * bytes_per_element;
  a.total_bytes = a.bytes_per_device * mesh.devices();
  return a;
}

double shard_read_seconds(const ShardedArray& a, const HardwareProfile& hw) {
  return a.bytes_per_device / hw.hbm_bandwidth;
}

ShardedFlops sharded_flops(double flops, const std::map<char, std::string>& dim_axes, const NamedMesh& mesh) {
  ShardedFlops s;
  std::set<std::string> used;
  for (const auto& [dim, entry] : dim_axes) {
    for (const std::string& axis : axes_of(entry, mesh)) {
      s.split *= mesh.size(axis);  // UserError for an unknown axis
      if (!used.insert(axis).second) {
        throw UserError("--shard splits two dims over mesh axis " + axis + "; an axis shards one dim at most");
      }
    }
  }
  s.replication = mesh.devices() / s.split;
  s.per_device = flops / s.split;
  s.over_mesh = s.per_device * mesh.devices();
  return s;
}

std::string ShardedArray::describe() const {
  std::string out = "A[";
  for (size_t d = 0; d < global.size(); ++d) {
    out += d ? ", " : "";
    out += static_cast<char>('I' + d);
    if (!spec[d].empty()) {
      out += "_";
      for (const std::string& axis : spec[d]) out += axis;
    }
  }
  return out + "]";
}

}  // namespace shardlab::cost
