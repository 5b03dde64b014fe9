#include "parallel/data_parallel/gradient_sync.h"

#include "framework/error.h"

namespace shardlab::parallel {

DataAxes DataAxes::of(const Mesh& mesh) {
  DataAxes a;
  std::vector<std::string> rows;  // the axes that split the batch's rows
  for (const char* n : {kDataAxis, kFsdpAxis}) {
    if (mesh.has_axis(n)) rows.push_back(n);
  }
  if (rows.empty()) throw UserError("the mesh " + mesh.describe() + " has no data or fsdp axis; add data=1");
  std::vector<std::string> same_experts = rows;
  if (mesh.splits(kContextAxis)) same_experts.push_back(kContextAxis);
  a.expert_data = &mesh.group(same_experts);
  if (mesh.splits(kExpertAxis)) rows.push_back(kExpertAxis), same_experts.push_back(kExpertAxis);
  a.batch = &mesh.group(rows);
  a.all = &mesh.group(same_experts);
  const bool hybrid = mesh.splits(kFsdpAxis) && mesh.has_axis(kDataAxis);
  a.shard = hybrid ? &mesh.axis(kFsdpAxis) : a.expert_data;
  std::vector<std::string> replica;
  if (hybrid && mesh.axis_size(kDataAxis) > 1) replica.push_back(kDataAxis);
  if (hybrid && mesh.splits(kContextAxis)) replica.push_back(kContextAxis);
  a.replica = replica.empty() ? nullptr : &mesh.group(replica);
  std::vector<std::string> dense_replica = replica;
  if (a.all != a.expert_data) dense_replica.push_back(kExpertAxis);
  a.dense_replica = dense_replica.empty() ? nullptr : &mesh.group(dense_replica);
  return a;
}

}  // namespace shardlab::parallel
