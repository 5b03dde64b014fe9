// Mesh construction, coordinates, neighbours and groups; spec validation (the
// failing-job side of validation is tests/mesh_error_check.cpp).
#include <doctest/doctest.h>
#include <mpi.h>

#include "framework/error.h"
#include "parallel/comm/mesh.h"

using namespace shardlab;
using namespace shardlab::parallel;

TEST_CASE("parse_mesh_spec reads axes outermost first and rejects bad specs") {
  auto axes = parse_mesh_spec("data=2,pipe=1,tensor=4");
  REQUIRE(axes.size() == 3);
  CHECK(axes[0].name == "data");
  CHECK(axes[2].size == 4);
  CHECK_THROWS_WITH_AS(parse_mesh_spec("data=2,model=2"), doctest::Contains("unknown mesh axis 'model'"), UserError);
  CHECK_THROWS_WITH_AS(parse_mesh_spec("data=2,data=2"), doctest::Contains("appears twice"), UserError);
  CHECK_THROWS_WITH_AS(parse_mesh_spec("data=0"), doctest::Contains("at least 1"), UserError);
  CHECK_THROWS_WITH_AS(parse_mesh_spec("data=-2"), doctest::Contains("at least 1"), UserError);
  CHECK_THROWS_WITH_AS(parse_mesh_spec("data=x"), doctest::Contains("not an integer"), UserError);
  CHECK_THROWS_WITH_AS(parse_mesh_spec("data"), doctest::Contains("not name=size"), UserError);
  CHECK_THROWS_WITH_AS(parse_mesh_spec("tensor=2,data=2"), doctest::Contains("outermost first"), UserError);
  CHECK_THROWS_WITH_AS(validate_mesh(axes, 3), doctest::Contains("has 8 ranks but the job has 3"), UserError);
}

TEST_CASE("a mesh whose sizes do not multiply to the ranks throws before any collective") {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  CHECK_THROWS_AS(Mesh(MPI_COMM_WORLD, "data=" + std::to_string(n + 1)), UserError);
}

TEST_CASE("coordinates are row-major with the innermost axis on neighbouring ranks") {
  int n = 0, world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  if (n % 2 != 0) return;
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(n / 2) + ",tensor=2", Topology::kMesh);
  CHECK(mesh.rank() == world);
  CHECK(mesh.coord("tensor") == world % 2);
  CHECK(mesh.coord("data") == world / 2);
  CHECK(mesh.axis("tensor").size() == 2);
  CHECK(mesh.axis("tensor").rank() == world % 2);
  CHECK(mesh.group({"tensor", "data"}).size() == n);
  CHECK(mesh.group({"tensor", "data"}).rank() == world);  // normalised to outermost first
  CHECK(mesh.group({"tensor", "data"}).name() == "data+tensor");
  CHECK(&mesh.all() == &mesh.group({"data", "tensor"}));

  const Axis& data = mesh.axis_info("data");
  CHECK_FALSE(data.wraparound);
  CHECK(data.neighbour(-1) == (data.coord == 0 ? MPI_PROC_NULL : data.coord - 1));
  CHECK(data.neighbour(+1) == (data.coord + 1 == data.size ? MPI_PROC_NULL : data.coord + 1));
  Mesh torus(MPI_COMM_WORLD, "data=" + std::to_string(n / 2) + ",tensor=2");
  const Axis& ring = torus.axis_info("data");
  CHECK(ring.neighbour(-1) == (ring.coord + ring.size - 1) % ring.size);
  CHECK_THROWS_WITH_AS(mesh.axis("pipe"), doctest::Contains("has no axis 'pipe'"), UserError);
  CHECK_THROWS_AS(mesh.group({"data", "data"}), UserError);
}
