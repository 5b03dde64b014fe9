#include "parallel/data_parallel/gradient_sync.h"

#include "framework/error.h"

namespace shardlab::parallel {

DataAxes DataAxes::of(const Mesh& mesh) {
  DataAxes a;
  std::vector<std::string> names;
  for (const char* n : {kDataAxis, kFsdpAxis}) {
    if (mesh.has_axis(n)) names.push_back(n);
  }
  if (names.empty()) throw UserError("the mesh " + mesh.describe() + " has no data or fsdp axis; add data=1");
  a.expert_data = &mesh.group(names);
  if (mesh.splits(kExpertAxis)) names.push_back(kExpertAxis);
  a.all = &mesh.group(names);
  const bool hybrid = mesh.splits(kFsdpAxis) && mesh.has_axis(kDataAxis);
  a.shard = hybrid ? &mesh.axis(kFsdpAxis) : a.expert_data;
  a.replica = hybrid && mesh.axis_size(kDataAxis) > 1 ? &mesh.axis(kDataAxis) : nullptr;
  std::vector<std::string> dense_replica;
  if (a.replica) dense_replica.push_back(kDataAxis);
  if (a.all != a.expert_data) dense_replica.push_back(kExpertAxis);
  a.dense_replica = dense_replica.empty() ? nullptr : &mesh.group(dense_replica);
  return a;
}

}  // namespace shardlab::parallel
