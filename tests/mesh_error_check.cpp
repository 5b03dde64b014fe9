// A job that builds the mesh given on its command line and does one collective: the
// mesh tests run it with bad specs and expect every rank to fail fast with the message.
#include <mpi.h>

#include <cstdio>

#include "parallel/comm/collectives.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/mesh.h"

using namespace shardlab::parallel;

int main(int argc, char** argv) {
  MpiRuntime mpi(argc, argv);
  return run_mpi_main(MPI_COMM_WORLD, [&] {
    Mesh mesh(MPI_COMM_WORLD, argc > 1 ? argv[1] : "");
    std::vector<float> v(4, 1.0f);
    all_reduce(mesh.all(), v);
    return 0;
  });
}
