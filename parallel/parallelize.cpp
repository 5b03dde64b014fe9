#include "parallel/parallelize.h"

#include "framework/error.h"
#include "parallel/fsdp/fsdp.h"
#include "parallel/tensor/tensor_parallel.h"

namespace shardlab::parallel {

std::unique_ptr<DataParallel> parallelize(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config) {
  DataParallelConfig data = config.data;
  if (mesh.has_axis("tensor") && mesh.axis_size("tensor") > 1) {
    data.model_shards = apply_tensor_parallel(model, mesh.axis("tensor"), config.data.seed);
  }
  // Pipeline and expert parallelism come here as they land; FSDP/DP last.
  if (data.zero == 3) return make_fsdp(model, mesh, data);
  return make_bucketed_data_parallel(model, mesh, data);
}

StepPlan plan_step(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config, int microbatches) {
  SL_ASSERT(microbatches >= 1, "a step has at least one microbatch");
  if (config.data.zero == 3) return plan_fsdp_step(model, mesh, config.data, microbatches);
  return plan_bucketed_step(model, mesh, config.data);
}

}  // namespace shardlab::parallel
