#include "parallel/comm/two_level.h"

#include <algorithm>
#include <vector>

#include "framework/error.h"

namespace shardlab::parallel {

namespace {

float combine(float a, float b, ReduceOp op) { return op == ReduceOp::kSum ? a + b : std::max(a, b); }

// Element counts and offsets of `parts` near-equal pieces of `n` (the first n % parts longer).
void split(int64_t n, int parts, std::vector<int>& counts, std::vector<int>& offsets) {
  counts.assign(parts, 0);
  offsets.assign(parts, 0);
  for (int p = 0, offset = 0; p < parts; ++p) {
    counts[p] = mpi_count(n / parts + (p < n % parts ? 1 : 0));
    offsets[p] = offset;
    offset += counts[p];
  }
}

// All-reduce of `data` over `comm` as a ring: reduce-scatter, then all-gather, of one
// piece per rank. Every step sends to the next rank while receiving from the previous,
// so both directions of each link carry data at once (OpenMPI's own all_reduce of 2 ranks
// may reduce one way, then broadcast the other, leaving half the duplex link idle).
void ring_all_reduce(MPI_Comm comm, float* data, int64_t n, ReduceOp op, ScratchPool& scratch) {
  int rank = 0, size = 1;
  SL_MPI(MPI_Comm_rank(comm, &rank));
  SL_MPI(MPI_Comm_size(comm, &size));
  std::vector<int> counts, offsets;
  split(n, size, counts, offsets);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const auto piece = [&](int step) { return ((step % size) + size) % size; };
  std::vector<float> arrived = scratch.take(counts[0]);
  for (int s = 0; s < size - 1; ++s) {  // reduce-scatter: this rank ends with piece rank+1
    const int out = piece(rank - s), in = piece(rank - s - 1);
    SL_MPI(MPI_Sendrecv(data + offsets[out], counts[out], MPI_FLOAT, next, 0, arrived.data(), counts[in], MPI_FLOAT,
                        prev, 0, comm, MPI_STATUS_IGNORE));
    float* into = data + offsets[in];
    for (int i = 0; i < counts[in]; ++i) into[i] = combine(into[i], arrived[i], op);
  }
  scratch.give(std::move(arrived));
  for (int s = 0; s < size - 1; ++s) {  // all-gather the reduced pieces
    const int out = piece(rank + 1 - s), in = piece(rank - s);
    SL_MPI(MPI_Sendrecv(data + offsets[out], counts[out], MPI_FLOAT, next, 1, data + offsets[in], counts[in], MPI_FLOAT,
                        prev, 1, comm, MPI_STATUS_IGNORE));
  }
}

}  // namespace

void two_level_all_reduce(const HostTopology& hosts, std::span<float> buffer, ReduceOp op, ScratchPool& scratch) {
  SL_ASSERT(hosts.two_level(), "two-level all_reduce on a flat group (" + hosts.describe() + ")");
  const int local_ranks = hosts.ranks_per_host();
  int me = 0;
  SL_MPI(MPI_Comm_rank(hosts.intra(), &me));
  const int64_t n = static_cast<int64_t>(buffer.size());
  std::vector<int> counts, offsets;
  split(n, local_ranks, counts, offsets);
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
    for (int l = 1; l < local_ranks; ++l) acc = combine(acc, parts[l][i], op);
    slice[i] = acc;
  }
  scratch.give(std::move(arrived));

  // 2. Across hosts, slice by slice: every local rank on the network at once.
  ring_all_reduce(hosts.inter(), slice, mine, op, scratch);

  // 3. Gather the reduced slices in the host.
  SL_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.data(), counts.data(), offsets.data(), MPI_FLOAT,
                        hosts.intra()));
}

}  // namespace shardlab::parallel
