#include "parallel/comm/mesh.h"

#include <algorithm>

#include "framework/error.h"
#include "parallel/comm/comm_context.h"

namespace shardlab::parallel {
Topology parse_topology(const std::string& name) {
  if (name == "torus") return Topology::kTorus;
  if (name == "mesh") return Topology::kMesh;
  throw UserError("unknown topology '" + name + "'; choose torus (wraparound) or mesh (none)");
}

int Axis::neighbour(int direction) const {
  int target = coord + direction;
  if (target < 0 || target >= size) {
    if (!wraparound) return MPI_PROC_NULL;
    target = (target + size) % size;
  }
  return target;
}

AxisGroup::AxisGroup(std::vector<const Axis*> axes, Comm comm, CommContext* context)
    : axes_(std::move(axes)), comm_(std::move(comm)), context_(context) {
  std::vector<std::string> names;
  for (const Axis* a : axes_) {
    names.push_back(a->name);
    size_ *= a->size;
    rank_ = rank_ * a->size + a->coord;
  }
  name_ = join_names(names, "+");
  SL_ASSERT(comm_.rank() == rank_ && comm_.size() == size_, "group " + name_ + " rank order is not row-major");
}

const Axis& AxisGroup::single_axis() const {
  SL_ASSERT(axes_.size() == 1, "group " + name_ + " has several axes");
  return *axes_.front();
}

Mesh::~Mesh() = default;

Mesh::Mesh(MPI_Comm parent, const std::string& spec, Topology topology)
    : Mesh(parent, parse_mesh_spec(spec), topology) {}

Mesh::Mesh(MPI_Comm parent, const std::vector<AxisSpec>& specs, Topology topology) : topology_(topology) {
  int parent_size = 0;
  SL_MPI(MPI_Comm_size(parent, &parent_size));
  validate_mesh(specs, parent_size);  // before the first collective, on every rank alike

  const int n = static_cast<int>(specs.size());
  std::vector<int> dims, periods(n, topology == Topology::kTorus ? 1 : 0);
  for (const AxisSpec& a : specs) dims.push_back(a.size);
  MPI_Comm cart = MPI_COMM_NULL;
  // No reordering: the innermost axis then spans consecutive parent ranks (same node).
  SL_MPI(MPI_Cart_create(parent, n, dims.data(), periods.data(), /*reorder=*/0, &cart));
  cart_ = Comm::owned(cart);
  rank_ = cart_.rank();
  size_ = cart_.size();
  std::vector<int> coords(n);
  SL_MPI(MPI_Cart_coords(cart, rank_, n, coords.data()));

  std::vector<std::string> names;
  for (const AxisSpec& a : specs) names.push_back(a.name);
  context_ = std::make_unique<CommContext>(names, cart, rank_);
  for (int i = 0; i < n; ++i) {
    auto axis = std::make_unique<Axis>();
    axis->name = specs[i].name;
    axis->index = i;
    axis->size = specs[i].size;
    axis->coord = coords[i];
    axis->wraparound = topology == Topology::kTorus;
    axes_.push_back(std::move(axis));
  }
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::vector<int> remain(n);
    std::vector<const Axis*> members;
    for (int i = 0; i < n; ++i) {
      remain[i] = (mask >> i) & 1;
      if (remain[i]) members.push_back(axes_[i].get());
    }
    MPI_Comm sub = MPI_COMM_NULL;
    SL_MPI(MPI_Cart_sub(cart, remain.data(), &sub));
    if (members.size() == 1) {
      axes_[members.front()->index]->comm = Comm::owned(sub);
      SL_MPI(MPI_Comm_dup(sub, &sub));  // the group keeps its own handle
    }
    groups_.push_back(std::make_unique<AxisGroup>(members, Comm::owned(sub), context_.get()));
  }
  context_->hosts = HostTopologies(*this, host_of_this_rank(cart));
}

std::string Mesh::describe() const {
  std::vector<AxisSpec> specs;
  for (const auto& a : axes_) specs.push_back({a->name, a->size});
  return axis_sizes_string(specs) + (topology_ == Topology::kTorus ? " (torus)" : " (mesh)");
}

bool Mesh::has_axis(const std::string& name) const {
  return std::any_of(axes_.begin(), axes_.end(), [&](const auto& a) { return a->name == name; });
}

int Mesh::axis_index(const std::string& name) const {
  for (const auto& a : axes_) {
    if (a->name == name) return a->index;
  }
  throw UserError("mesh " + describe() + " has no axis '" + name + "'");
}

const Axis& Mesh::axis_info(const std::string& name) const { return *axes_[axis_index(name)]; }

const AxisGroup& Mesh::axis(const std::string& name) const { return *groups_[(1u << axis_index(name)) - 1]; }

const AxisGroup& Mesh::group(const std::vector<std::string>& names) const {
  if (names.empty()) throw UserError("an axis group needs at least one axis of mesh " + describe());
  unsigned mask = 0;
  for (const std::string& name : names) {
    unsigned bit = 1u << axis_index(name);
    if (mask & bit) throw UserError("axis '" + name + "' is named twice in a group of mesh " + describe());
    mask |= bit;
  }
  return *groups_[mask - 1];
}

const AxisGroup& Mesh::group_named(const std::string& name) const {
  std::vector<std::string> names;
  std::stringstream in(name);
  for (std::string axis; std::getline(in, axis, '+');) names.push_back(axis);
  return group(names);
}

}  // namespace shardlab::parallel
