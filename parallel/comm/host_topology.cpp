#include "parallel/comm/host_topology.h"

#include <algorithm>

#include "framework/error.h"
#include "parallel/comm/mesh.h"

namespace shardlab::parallel {

HostTopology::HostTopology(const AxisGroup& group, const std::vector<int>& host_of_group_rank) {
  // Hosts in the order of their lowest group rank; this rank's host and local index.
  std::vector<int> hosts, counts;
  int my_host = 0, local_rank = 0;
  for (int r = 0; r < group.size(); ++r) {
    const auto at = std::find(hosts.begin(), hosts.end(), host_of_group_rank[r]);
    const int h = static_cast<int>(at - hosts.begin());
    if (at == hosts.end()) {
      hosts.push_back(host_of_group_rank[r]);
      counts.push_back(0);
    }
    if (r == group.rank()) {
      my_host = h;
      local_rank = counts[h];
    }
    ++counts[h];
  }
  hosts_ = static_cast<int>(hosts.size());
  const bool even = std::all_of(counts.begin(), counts.end(), [&](int c) { return c == counts.front(); });
  ranks_per_host_ = even ? counts.front() : 0;
  if (hosts_ == 1) {
    description_ = "flat: 1 host";
  } else if (!even) {
    description_ = "flat: hosts hold";
    for (size_t h = 0; h < counts.size(); ++h) description_ += (h ? ", " : " ") + std::to_string(counts[h]);
    description_ += " ranks";
  } else if (ranks_per_host_ == 1) {
    description_ = "flat: " + std::to_string(hosts_) + " hosts x 1 rank";
  } else {
    // Every rank of the group reaches here alike: the decision rests on the shared vector.
    MPI_Comm intra = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    SL_MPI(MPI_Comm_split(group.comm(), my_host, group.rank(), &intra));
    intra_ = Comm::owned(intra);
    SL_MPI(MPI_Comm_split(group.comm(), local_rank, my_host, &inter));
    inter_ = Comm::owned(inter);
    description_ = std::to_string(hosts_) + " hosts x " + std::to_string(ranks_per_host_) + " ranks";
  }
}

HostTopologies::HostTopologies(const Mesh& mesh, int host) {
  std::vector<int> host_of_mesh_rank(mesh.size());
  SL_MPI(MPI_Allgather(&host, 1, MPI_INT, host_of_mesh_rank.data(), 1, MPI_INT, mesh.comm()));
  std::vector<std::string> names(mesh.num_axes());
  for (const std::string& name : kAxisNames) {
    if (mesh.has_axis(name)) names[mesh.axis_info(name).index] = name;
  }
  MPI_Group mesh_ranks = MPI_GROUP_NULL;
  SL_MPI(MPI_Comm_group(mesh.comm(), &mesh_ranks));
  for (unsigned mask = 1; mask < (1u << names.size()); ++mask) {
    std::vector<std::string> members;
    for (size_t i = 0; i < names.size(); ++i) {
      if (mask >> i & 1) members.push_back(names[i]);
    }
    const AxisGroup& group = mesh.group(members);
    // Group rank -> mesh rank -> host, computed alike on every rank of the group.
    MPI_Group group_ranks = MPI_GROUP_NULL;
    SL_MPI(MPI_Comm_group(group.comm(), &group_ranks));
    std::vector<int> ranks(group.size()), in_mesh(group.size());
    for (int r = 0; r < group.size(); ++r) ranks[r] = r;
    SL_MPI(MPI_Group_translate_ranks(group_ranks, group.size(), ranks.data(), mesh_ranks, in_mesh.data()));
    SL_MPI(MPI_Group_free(&group_ranks));
    std::vector<int> host_of_group_rank(group.size());
    for (int r = 0; r < group.size(); ++r) host_of_group_rank[r] = host_of_mesh_rank[in_mesh[r]];
    by_mask_.emplace_back(group, host_of_group_rank);
  }
  SL_MPI(MPI_Group_free(&mesh_ranks));
}

const HostTopology& HostTopologies::of(const AxisGroup& group) const {
  unsigned mask = 0;
  for (const Axis* a : group.axes()) mask |= 1u << a->index;
  return mask - 1 < by_mask_.size() ? by_mask_[mask - 1] : flat_;
}

int host_of_this_rank(MPI_Comm comm) {
  int rank = 0, lowest = 0;
  SL_MPI(MPI_Comm_rank(comm, &rank));
  MPI_Comm node = MPI_COMM_NULL;
  SL_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  const Comm owned = Comm::owned(node);
  SL_MPI(MPI_Allreduce(&rank, &lowest, 1, MPI_INT, MPI_MIN, owned.get()));
  return lowest;
}

}  // namespace shardlab::parallel
