// doctest main for MPI tests: every rank runs every test case; only rank 0 reports
// unless a rank fails, and every rank exits non-zero when any rank failed, so mpiexec and
// CTest see the failure whichever rank it happened on.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>

#include "parallel/comm/comm.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  shardlab::parallel::install_mpi_abort_handler(MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  doctest::Context context;
  context.applyCommandLine(argc, argv);
  // Rank 0 prints its summary; the others print only their failures.
  if (rank != 0) {
    context.setOption("minimal", true);
    context.setOption("no-colors", true);
  }
  const int local_failures = context.run() != 0 ? 1 : 0;

  int any_failed = 0;
  MPI_Allreduce(&local_failures, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed && rank == 0 && !local_failures) std::fprintf(stderr, "a test failed on another rank\n");
  MPI_Finalize();
  return any_failed;
}
