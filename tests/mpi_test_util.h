// Small helpers shared by the MPI tests.
#pragma once

#include <mpi.h>

namespace shardlab::testing {

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

}  // namespace shardlab::testing
