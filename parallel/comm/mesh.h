// Mesh: the ranks of a parent communicator arranged as a named N-d grid (docs/mesh.md).
//
// Axes are named and listed outermost first, e.g. "data=2,pipe=2,tensor=2"; the tensor
// axis, innermost, gets neighbouring ranks. The mesh is an MPI Cartesian communicator
// with wraparound on every axis (Topology::kTorus) or none (Topology::kMesh, like a small
// TPU v5e slice). Every axis has its own ring communicator, and every set of axes a group
// communicator, all created up front so asking for one is never a hidden collective.
//
// Collectives (collectives.h) take an AxisGroup: one axis (`mesh.axis("tensor")`) or
// several at once (`mesh.group({"data", "fsdp"})`), whose ranks are ordered row-major
// over the axes' coordinates, outermost first. The mesh also owns the communication
// context its groups share (comm_context.h: link emulation, trace, watchdog, the auto
// table, the hosts each group spans, found at construction: host_topology.h); this header
// only declares it, so the context's parts may use the mesh.
//
//   Mesh mesh(job, "data=2,tensor=2");                   // 4 ranks of `job`, or a UserError
//   const AxisGroup& tp = mesh.axis("tensor");
//   all_reduce(tp, activations);                         // sum over the 2 tensor ranks
//
// Validation happens before any collective and identically on every rank, so a bad
// spec makes every rank throw the same UserError.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/comm.h"
#include "parallel/spec/mesh_spec.h"

namespace shardlab::parallel {

// The runtime state the mesh's groups share (comm_context.h). The mesh holds topology;
// include comm_context.h to use it.
struct CommContext;

enum class Topology { kTorus, kMesh };
Topology parse_topology(const std::string& name);  // "torus" | "mesh"

// One mesh axis as this rank sees it. Its communicator is a ring whose ranks equal the
// coordinates along the axis.
struct Axis {
  std::string name;
  int index = 0;  // position in the mesh, 0 = outermost
  int size = 1;
  int coord = 0;
  bool wraparound = true;
  Comm comm;

  // Rank in `comm` of the neighbour `direction` (+1 or -1) steps along the axis, or
  // MPI_PROC_NULL past the end of a line.
  int neighbour(int direction) const;
  // Rank in `comm` of coordinate `coord + offset`, wrapping cyclically (for ppermute).
  int shifted(int offset) const { return ((coord + offset) % size + size) % size; }
};

// One or more axes of a mesh treated as one set of ranks.
class AxisGroup {
 public:
  AxisGroup(std::vector<const Axis*> axes, Comm comm, CommContext* context);

  const std::string& name() const { return name_; }  // "tensor", "data+fsdp"
  int size() const { return size_; }
  int rank() const { return rank_; }                  // row-major over the axes' coords
  MPI_Comm comm() const { return comm_.get(); }
  const std::vector<const Axis*>& axes() const { return axes_; }
  const Axis& single_axis() const;  // the axis of a one-axis group (asserts)
  CommContext& context() const { return *context_; }

 private:
  std::vector<const Axis*> axes_;
  std::string name_;
  int size_ = 1;
  int rank_ = 0;
  Comm comm_;
  CommContext* context_;
};

class Mesh {
 public:
  // `parent` is borrowed and must outlive the mesh. Collective over `parent`.
  Mesh(MPI_Comm parent, const std::vector<AxisSpec>& axes, Topology topology = Topology::kTorus);
  Mesh(MPI_Comm parent, const std::string& spec, Topology topology = Topology::kTorus);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }  // rank in the mesh's Cartesian communicator
  int size() const { return size_; }
  MPI_Comm comm() const { return cart_.get(); }
  Topology topology() const { return topology_; }
  std::string describe() const;  // "data=2,tensor=2 (torus)"

  int num_axes() const { return static_cast<int>(axes_.size()); }
  bool has_axis(const std::string& name) const;
  // Whether the axis splits the work: the mesh has it, larger than 1 (a strategy applies).
  bool splits(const std::string& name) const { return has_axis(name) && axis_size(name) > 1; }
  // The axis's size, or 1 where the mesh does not have it.
  int size_of(const std::string& name) const { return has_axis(name) ? axis_size(name) : 1; }
  // Size and coordinate of a named axis; a UserError names the mesh's axes otherwise.
  int axis_size(const std::string& name) const { return axis_info(name).size; }
  int coord(const std::string& name) const { return axis_info(name).coord; }
  const Axis& axis_info(const std::string& name) const;

  const AxisGroup& axis(const std::string& name) const;
  // Any non-empty set of distinct axes, in any order (ordered outermost first inside).
  const AxisGroup& group(const std::vector<std::string>& names) const;
  // The group an AxisGroup::name() names: "tensor", "data+fsdp" (axes joined by '+').
  const AxisGroup& group_named(const std::string& name) const;
  // All axes together: the same ranks as comm().
  const AxisGroup& all() const { return *groups_.back(); }

  CommContext& context() const { return *context_; }

 private:
  int axis_index(const std::string& name) const;

  Topology topology_;
  Comm cart_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<std::unique_ptr<Axis>> axes_;
  std::unique_ptr<CommContext> context_;
  // groups_[mask - 1] holds the group of the axes whose bits are set in mask.
  std::vector<std::unique_ptr<AxisGroup>> groups_;
};

}  // namespace shardlab::parallel
