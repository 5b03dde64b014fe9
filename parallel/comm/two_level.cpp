#include "parallel/comm/two_level.h"

#include <algorithm>
#include <vector>

#include "framework/error.h"

namespace shardlab::parallel {

void two_level_all_reduce(const HostTopology& hosts, std::span<float> buffer, ReduceOp op, ScratchPool& scratch) {
  SL_ASSERT(hosts.two_level(), "two-level all_reduce on a flat group (" + hosts.describe() + ")");
  const int local_ranks = hosts.ranks_per_host();
  int me = 0;
  SL_MPI(MPI_Comm_rank(hosts.intra(), &me));
  const int64_t n = static_cast<int64_t>(buffer.size());
  std::vector<int> counts(local_ranks), offsets(local_ranks);
  for (int l = 0, offset = 0; l < local_ranks; ++l) {
    counts[l] = mpi_count(n / local_ranks + (l < n % local_ranks ? 1 : 0));
    offsets[l] = offset;
    offset += counts[l];
  }
  const int mine = counts[me];
  float* slice = buffer.data() + offsets[me];

  // 1. Reduce-scatter in the host, direct: each rank sends slice l to local rank l and
  // receives its own slice from each other rank (one round; (L-1)/L of the buffer each way).
  std::vector<float> arrived = scratch.take(static_cast<int64_t>(mine) * std::max(local_ranks - 1, 1));
  std::vector<MPI_Request> requests;
  std::vector<const float*> parts(local_ranks);
  for (int l = 0, k = 0; l < local_ranks; ++l) {
    if (l == me) {
      parts[l] = slice;
      continue;
    }
    float* into = arrived.data() + static_cast<int64_t>(mine) * k++;
    parts[l] = into;
    SL_MPI(MPI_Irecv(into, mine, MPI_FLOAT, l, 0, hosts.intra(), &requests.emplace_back()));
    SL_MPI(MPI_Isend(buffer.data() + offsets[l], counts[l], MPI_FLOAT, l, 0, hosts.intra(), &requests.emplace_back()));
  }
  SL_MPI(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
  // In local-rank order, element by element (slice is itself part `me`, read before written).
  for (int i = 0; i < mine; ++i) {
    float acc = parts[0][i];
    for (int l = 1; l < local_ranks; ++l) acc = op == ReduceOp::kSum ? acc + parts[l][i] : std::max(acc, parts[l][i]);
    slice[i] = acc;
  }
  scratch.give(std::move(arrived));

  // 2. Across hosts, slice by slice: every local rank on the network at once.
  SL_MPI(MPI_Allreduce(MPI_IN_PLACE, slice, mine, MPI_FLOAT, op == ReduceOp::kSum ? MPI_SUM : MPI_MAX, hosts.inter()));

  // 3. Gather the reduced slices in the host.
  SL_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.data(), counts.data(), offsets.data(), MPI_FLOAT,
                        hosts.intra()));
}

}  // namespace shardlab::parallel
