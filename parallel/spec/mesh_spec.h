// The text of a mesh: named axis sizes, "data=2,tensor=2". The runtime's --mesh, the
// planner's --layout ("fsdp=16,tensor=4,microbatches=4") and the sharding calculator's
// --mesh ("X=4,Y=8") are all read by parse_axis_sizes, so they take the same syntax and
// fail with the same messages; each caller then gives the names it knows. No MPI here: the
// `cost` library compiles it too.
//
//   std::vector<AxisSpec> axes = parse_axis_sizes("data=2,tensor=2", kAxisNames, "data=2,tensor=2");
//   axis_sizes_string(axes) == "data=2,tensor=2"
//   parse_axis_sizes("X=4,Y=8", {}, "X=4,Y=8");   // any names, in any order
#pragma once

#include <string>
#include <vector>

namespace shardlab::parallel {

struct AxisSpec {
  std::string name;
  int size = 1;
};

// "data=2,tensor=2" -> {{"data", 2}, {"tensor", 2}}, in the order written. Throws UserError,
// quoting the spec, on an empty spec, an item that is not name=size, a size that is not an
// integer, then as check_axis_sizes does. `example` (e.g. "data=2,tensor=2") is the hint.
std::vector<AxisSpec> parse_axis_sizes(const std::string& spec, const std::vector<std::string>& known,
                                       const std::string& example);

// Throws UserError on a repeated name or a size below 1 and, when `known` is not empty, on a
// name not in it or names out of its order (`known` lists them outermost first).
void check_axis_sizes(const std::vector<AxisSpec>& axes, const std::vector<std::string>& known);

// {{"data", 2}, {"tensor", 2}} -> "data=2,tensor=2".
std::string axis_sizes_string(const std::vector<AxisSpec>& axes);

// The axis names shardlab knows, outermost first (docs/mesh.md). Code names an axis through
// these constants, so that a reader can find every use of one. `tensor` carries tensor
// parallelism and, with --sequence-parallel, Megatron's sequence parallelism of its
// activations; `fsdp` and `data` are the data axes (hybrid sharding over both); `context`
// holds a slice of every sequence (parallel/context), which is not sequence parallelism.
inline constexpr char kDataAxis[] = "data";
inline constexpr char kFsdpAxis[] = "fsdp";
inline constexpr char kPipeAxis[] = "pipe";
inline constexpr char kExpertAxis[] = "expert";
inline constexpr char kContextAxis[] = "context";  // context parallelism: slices of each sequence
inline constexpr char kTensorAxis[] = "tensor";
inline const std::vector<std::string> kAxisNames = {kDataAxis,   kFsdpAxis,    kPipeAxis,
                                                    kExpertAxis, kContextAxis, kTensorAxis};

// "data=2,tensor=2" -> {{"data", 2}, {"tensor", 2}} (parse_axis_sizes over kAxisNames);
// throws UserError on bad syntax, unknown, repeated or misplaced names and sizes below 1.
std::vector<AxisSpec> parse_mesh_spec(const std::string& spec);

// Throws UserError unless the sizes multiply to `num_ranks` (names are checked too).
void validate_mesh(const std::vector<AxisSpec>& axes, int num_ranks);

// {"data", "tensor"}, "+" -> "data+tensor".
std::string join_names(const std::vector<std::string>& names, const char* separator);

}  // namespace shardlab::parallel
