// CommContext: the communication settings and records one Mesh shares among its axis
// groups -- link emulation, trace, watchdog, the auto algorithm table, the hosts each
// group spans (for two-level collectives), reusable scratch
// buffers, and the message tag counters that keep concurrent collectives on one axis apart. The Mesh owns it;
// reach it through mesh.context() or group.context().
//
//   mesh.context().links.configure(LinkMode::kAccount, cost::hardware("tpu-v5e"));
//   mesh.context().watchdog.set_timeout(30);
//   mesh.context().trace.set_recording(true);
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "parallel/comm/algorithm_table.h"
#include "parallel/comm/comm_trace.h"
#include "parallel/comm/host_topology.h"
#include "parallel/comm/link_emulation.h"
#include "parallel/comm/schedule.h"
#include "parallel/comm/watchdog.h"

namespace shardlab::parallel {

struct CommContext {
  CommContext(const std::vector<std::string>& axis_names, MPI_Comm mesh_comm, int mesh_rank)
      : links(axis_names), watchdog(mesh_comm, mesh_rank), next_tag(axis_names.size(), 0) {}

  LinkEmulation links;
  CommTrace trace;
  Watchdog watchdog;
  AlgorithmTable auto_table = AlgorithmTable::builtin();
  HostTopologies hosts;  // built by the Mesh once its groups exist
  ScratchPool scratch;
  // Per mesh axis: a sequence number for the next neighbour-algorithm collective. Every
  // rank of an axis issues the same collectives in the same order, so the numbers agree.
  std::vector<int> next_tag;
};

}  // namespace shardlab::parallel
