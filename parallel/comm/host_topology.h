// HostTopology: how the ranks of one axis group sit on hosts, for the two-level
// collectives (two_level.h, docs/collectives.md).
//
// A group whose ranks fill H > 1 hosts with the same L > 1 ranks on each is two-level:
// it has an intra-host communicator (the L ranks of this rank's host, ordered by group
// rank: shared memory) and an inter-host communicator (the H ranks, one per host, that
// have this rank's local index, ordered by host: the network). Every other group is flat
// -- it sits on one host, has one rank per host, or its hosts hold different numbers of
// its ranks -- and describe() says which; a two-level collective on it runs flat.
//
// Hosts are numbered in the order of their lowest group rank, so host h's ranks come
// before host h+1's when the mesh's ranks are packed host by host (mpirun's default).
//
// HostTopologies holds one HostTopology per axis group of a mesh. The Mesh builds them at
// construction (collective over the mesh, one allgather plus two communicator splits per
// two-level group), from the shared-memory split of its ranks (MPI_COMM_TYPE_SHARED).
// A test may rebuild them with made-up hosts, collectively over the mesh:
//
//   mesh.context().hosts = HostTopologies(mesh, mesh.rank() / 2);   // "hosts" of 2 ranks
//   const HostTopology& t = mesh.context().hosts.of(mesh.axis("data"));
//   if (t.two_level()) std::printf("%s\n", t.describe().c_str());   // "2 hosts x 2 ranks"
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "parallel/comm/comm.h"

namespace shardlab::parallel {

class AxisGroup;
class Mesh;

class HostTopology {
 public:
  HostTopology() = default;  // one host: flat
  // `host_of_group_rank[r]` names the host of group rank r (the same vector on every rank
  // of the group). Collective over the group when it is two-level (it splits its comm).
  HostTopology(const AxisGroup& group, const std::vector<int>& host_of_group_rank);

  bool two_level() const { return intra_.get() != MPI_COMM_NULL; }
  int hosts() const { return hosts_; }
  int ranks_per_host() const { return ranks_per_host_; }  // 0 where hosts hold different numbers
  MPI_Comm intra() const { return intra_.get(); }        // MPI_COMM_NULL when flat
  MPI_Comm inter() const { return inter_.get(); }
  // "2 hosts x 2 ranks", or why the group is flat: "flat: 1 host", "flat: hosts hold 3, 1 ranks".
  const std::string& describe() const { return description_; }

 private:
  int hosts_ = 1;
  int ranks_per_host_ = 0;
  Comm intra_;
  Comm inter_;
  std::string description_ = "flat: 1 host";
};

class HostTopologies {
 public:
  HostTopologies() = default;  // every group flat (before the mesh builds them)
  // Collective over the mesh: `host` names this rank's host; ranks passing the same value
  // share one. The mesh passes host_of_this_rank(mesh.comm()).
  HostTopologies(const Mesh& mesh, int host);

  // The group's topology (flat for a group the mesh did not build it for).
  const HostTopology& of(const AxisGroup& group) const;

 private:
  std::vector<HostTopology> by_mask_;  // [mask - 1]: the group of the axes whose bits are set
  HostTopology flat_;
};

// Collective over `comm`: the lowest rank of `comm` on this rank's host (the ranks that
// share memory with it, MPI_COMM_TYPE_SHARED) -- equal on the ranks of one host.
int host_of_this_rank(MPI_Comm comm);

}  // namespace shardlab::parallel
