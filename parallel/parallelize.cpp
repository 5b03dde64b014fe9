#include "parallel/parallelize.h"

#include "framework/error.h"
#include "parallel/fsdp/fsdp.h"
#include "parallel/tensor/tensor_parallel.h"

namespace shardlab::parallel {

namespace {

// Tensor, then (as they land) pipeline and expert parallelism: how they split the model.
std::shared_ptr<const ModelShards> apply_model_parallel(nn::Transformer& model, const Mesh& mesh,
                                                        const ParallelConfig& config) {
  if (!mesh.has_axis("tensor") || mesh.axis_size("tensor") == 1) return nullptr;
  return apply_tensor_parallel(model, mesh.axis("tensor"), config.data.seed, config.tensor);
}

}  // namespace

std::shared_ptr<const ModelShards> parallelize_for_inference(nn::Transformer& model, const Mesh& mesh,
                                                             const ParallelConfig& config) {
  auto shards = apply_model_parallel(model, mesh, config);
  nn::initialize_unallocated(model, config.data.seed);
  return shards;
}

std::unique_ptr<DataParallel> parallelize(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config) {
  DataParallelConfig data = config.data;
  data.model_shards = apply_model_parallel(model, mesh, config);
  // FSDP/DP last, over the model-parallel shards.
  if (data.zero == 3) return make_fsdp(model, mesh, data);
  return make_bucketed_data_parallel(model, mesh, data);
}

StepPlan plan_step(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config, const StepShape& step) {
  SL_ASSERT(step.microbatches >= 1, "a step has at least one microbatch");
  const int64_t rows = step.batch / DataAxes::of(mesh).all->size() / step.microbatches;
  const bool tensor = mesh.has_axis("tensor") && mesh.axis_size("tensor") > 1;
  StepPlan plan;
  // Tensor parallelism's hooks run inside forward and backward; the data-parallel
  // collectives follow on other groups, and the gradient norm's sum over tensor last.
  plan_tensor_parallel_step(plan, mesh, model.config, config.tensor, rows, step.seq_len, step.microbatches);
  // The data-parallel strategy sees this rank's tensor shards: plan it on a model of
  // their shapes (built deferred, so it costs nothing), leaving `model` untouched.
  std::unique_ptr<nn::Transformer> local;
  if (tensor) {
    nn::DeferParameters defer;
    local = std::make_unique<nn::Transformer>(model.config);
    const auto shards = tensor_shards(model.config, mesh.axis_size("tensor"), mesh.coord("tensor"));
    for (const nn::Parameter& p : local->parameters()) {
      const auto it = shards.find(p.name);
      if (it != shards.end()) *p.tensor = Tensor::unallocated(it->second.local());
    }
  }
  nn::Transformer& sharded = local ? *local : model;
  const StepPlan data = config.data.zero == 3 ? plan_fsdp_step(sharded, mesh, config.data, step.microbatches)
                                              : plan_bucketed_step(sharded, mesh, config.data);
  plan.insert(plan.end(), data.begin(), data.end());
  if (tensor) add_planned(plan, mesh, {"tensor", CollectiveOp::kAllReduce, kBytesPerFloat, "gradient norm"});
  return plan;
}

}  // namespace shardlab::parallel
