#include "parallel/parallelize.h"

#include "framework/error.h"
#include "parallel/fsdp/fsdp.h"

namespace shardlab::parallel {

std::unique_ptr<DataParallel> parallelize(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config) {
  // Tensor, pipeline and expert parallelism come first as they land; FSDP/DP last.
  if (config.data.zero == 3) return make_fsdp(model, mesh, config.data);
  return make_bucketed_data_parallel(model, mesh, config.data);
}

StepPlan plan_step(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config, int microbatches) {
  SL_ASSERT(microbatches >= 1, "a step has at least one microbatch");
  if (config.data.zero == 3) return plan_fsdp_step(model, mesh, config.data, microbatches);
  return plan_bucketed_step(model, mesh, config.data);
}

}  // namespace shardlab::parallel
