#include "parallel/spec/mesh_spec.h"

#include <algorithm>
#include <set>

#include "framework/error.h"

namespace shardlab::parallel {

std::vector<AxisSpec> parse_axis_sizes(const std::string& spec, const std::vector<std::string>& known,
                                       const std::string& example) {
  if (spec.empty()) throw UserError("empty mesh spec; write axes outermost first, e.g. " + example);
  const std::string example_item = example.substr(example.rfind(',') + 1);
  std::vector<AxisSpec> axes;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t end = std::min(spec.find(',', begin), spec.size());
    std::string item = spec.substr(begin, end - begin);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw UserError("mesh spec '" + spec + "': item '" + item + "' is not name=size (e.g. " + example_item + ")");
    }
    AxisSpec axis{item.substr(0, eq), 0};
    const std::string size_text = item.substr(eq + 1);
    size_t used = 0;
    try {
      axis.size = std::stoi(size_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != size_text.size()) {
      throw UserError("mesh spec '" + spec + "': size '" + size_text + "' of axis " + axis.name + " is not an integer");
    }
    axes.push_back(axis);
    begin = end + 1;
  }
  check_axis_sizes(axes, known);
  return axes;
}

void check_axis_sizes(const std::vector<AxisSpec>& axes, const std::vector<std::string>& known) {
  std::set<std::string> seen;
  int last_known = -1;
  for (const AxisSpec& a : axes) {
    const auto place = std::find(known.begin(), known.end(), a.name);
    if (!known.empty() && place == known.end()) {
      throw UserError("unknown mesh axis '" + a.name + "' in " + axis_sizes_string(axes) + "; known axes: " +
                      join_names(known, ", "));
    }
    if (!seen.insert(a.name).second) {
      throw UserError("mesh axis '" + a.name + "' appears twice in " + axis_sizes_string(axes));
    }
    if (a.size < 1) {
      throw UserError("mesh axis " + a.name + "=" + std::to_string(a.size) + " in " + axis_sizes_string(axes) +
                      ": sizes must be at least 1 (use 1 to switch an axis off)");
    }
    if (known.empty()) continue;
    const int position = static_cast<int>(place - known.begin());
    if (position < last_known) {
      throw UserError("mesh " + axis_sizes_string(axes) + " lists axes out of order; write them outermost first: " +
                      join_names(known, ","));
    }
    last_known = position;
  }
}

std::string axis_sizes_string(const std::vector<AxisSpec>& axes) {
  std::vector<std::string> parts;
  for (const AxisSpec& a : axes) parts.push_back(a.name + "=" + std::to_string(a.size));
  return join_names(parts, ",");
}

std::string join_names(const std::vector<std::string>& names, const char* separator) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

std::vector<AxisSpec> parse_mesh_spec(const std::string& spec) {
  return parse_axis_sizes(spec, kAxisNames, "data=2,tensor=2");
}

void validate_mesh(const std::vector<AxisSpec>& axes, int num_ranks) {
  if (axes.empty()) throw UserError("a mesh needs at least one axis, e.g. data=" + std::to_string(num_ranks));
  check_axis_sizes(axes, kAxisNames);
  long long product = 1;
  for (const AxisSpec& a : axes) product *= a.size;
  if (num_ranks >= 0 && product != num_ranks) {
    throw UserError("mesh " + axis_sizes_string(axes) + " has " + std::to_string(product) + " ranks but the job has " +
                    std::to_string(num_ranks) + "; make the axis sizes multiply to " + std::to_string(num_ranks) +
                    " (mpirun -n " + std::to_string(product) + " runs this mesh)");
  }
}

}  // namespace shardlab::parallel
