// A deliberately mismatched collective: coordinate 0 waits to receive while the others
// run an all_reduce. The watchdog (1 s) must abort the job, naming rank, axis, op, bytes.
#include <mpi.h>

#include <vector>

#include "parallel/comm/collectives.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/mesh.h"

using namespace shardlab::parallel;

int main(int argc, char** argv) {
  MpiRuntime mpi(argc, argv);
  return run_mpi_main(MPI_COMM_WORLD, [&] {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(n));
    mesh.context().watchdog.set_timeout(1.0);
    std::vector<float> v(1024, 1.0f);
    if (mesh.coord("data") == 0) {
      recv(mesh.axis("data"), v, 1);
    } else {
      all_reduce(mesh.axis("data"), v, ReduceOp::kSum, Algorithm::kRing);
    }
    return 0;
  });
}
