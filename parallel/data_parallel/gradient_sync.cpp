#include "parallel/data_parallel/gradient_sync.h"

#include "framework/error.h"

namespace shardlab::parallel {

DataAxes DataAxes::of(const Mesh& mesh) {
  DataAxes a;
  std::vector<std::string> names;
  for (const char* n : {"data", "fsdp"}) {
    if (mesh.has_axis(n)) names.push_back(n);
  }
  if (names.empty()) throw UserError("the mesh " + mesh.describe() + " has no data or fsdp axis; add data=1");
  a.expert_data = &mesh.group(names);
  if (mesh.has_axis("expert") && mesh.axis_size("expert") > 1) names.push_back("expert");
  a.all = &mesh.group(names);
  const bool hybrid = mesh.has_axis("fsdp") && mesh.axis_size("fsdp") > 1 && mesh.has_axis("data");
  a.shard = hybrid ? &mesh.axis("fsdp") : a.expert_data;
  a.replica = hybrid && mesh.axis_size("data") > 1 ? &mesh.axis("data") : nullptr;
  std::vector<std::string> dense_replica;
  if (a.replica) dense_replica.push_back("data");
  if (a.all != a.expert_data) dense_replica.push_back("expert");
  a.dense_replica = dense_replica.empty() ? nullptr : &mesh.group(dense_replica);
  return a;
}

}  // namespace shardlab::parallel
