#include "parallel/parallelize.h"

#include "framework/error.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/collectives.h"
#include "parallel/data_parallel/data_parallel.h"
#include "parallel/data_parallel/zero.h"
#include "parallel/expert/expert_parallel.h"
#include "parallel/fsdp/fsdp.h"

namespace shardlab::parallel {

namespace {

// The pipeline's configuration as the mesh and the precision policy complete it: under
// sequence parallelism the activations it passes are split over the tensor axis, and they
// travel in the policy's activation dtype.
PipelineConfig pipeline_config(const Mesh& mesh, const ParallelConfig& config) {
  PipelineConfig pipeline = config.pipeline;
  if (config.tensor.sequence_parallel && mesh.splits(kTensorAxis)) {
    pipeline.sequence_split = mesh.axis_size(kTensorAxis);
  }
  pipeline.wire = config.precision.activation;
  return pipeline;
}

// The data-parallel configuration as the precision policy completes it: parameters are
// gathered in the compute dtype.
DataParallelConfig data_config(const ParallelConfig& config) {
  DataParallelConfig data = config.data;
  data.param_dtype = config.precision.gather;
  data.reduce_dtype = config.precision.reduce;
  return data;
}

// The tensor axis's configuration as the precision policy completes it: the stream's
// collectives carry the policy's activation dtype.
TensorParallelConfig tensor_config(const ParallelConfig& config) {
  TensorParallelConfig tensor = config.tensor;
  tensor.activation_dtype = config.precision.activation;
  return tensor;
}

// The context axis's configuration as the precision policy completes it: K/V blocks
// travel in the compute dtype.
ContextParallelConfig context_config(const ParallelConfig& config) {
  ContextParallelConfig context = config.context;
  context.kv_dtype = config.precision.compute;
  return context;
}

// The data-parallel strategy of the ZeRO stage, and the collectives it issues in a step.
std::unique_ptr<GradientSync> make_gradient_sync(nn::Transformer& model, const Mesh& mesh,
                                                 const DataParallelConfig& config, const ModelSplit& split) {
  switch (config.zero) {
    case 0: return make_distributed_data_parallel(model, mesh, config, split);
    case 1:
    case 2: return make_zero(model, mesh, config, split);
    default: return make_fsdp(model, mesh, config, split);
  }
}

StepPlan plan_gradient_sync(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                            const ModelSplit& split, int microbatches) {
  switch (config.zero) {
    case 0: return plan_distributed_step(model, mesh, config, split);
    case 1:
    case 2: return plan_zero_step(model, mesh, config, split);
    default: return plan_fsdp_step(model, mesh, config, split, microbatches);
  }
}

// Expert parallelism over what tensor parallelism left: both split some parameters, so
// the shards nest.
std::shared_ptr<const ModelShards> nest(const Mesh& mesh, std::shared_ptr<const ModelShards> tensor,
                                        std::shared_ptr<const AxisShards> experts) {
  if (auto outer = std::dynamic_pointer_cast<const AxisShards>(tensor)) {
    return std::make_shared<NestedShards>(mesh.group({kExpertAxis, kTensorAxis}), outer, experts);
  }
  return experts;
}

// Gives each parameter of `local` named in `shards` its shard's shape (no storage);
// `cut`, where given, collects their names.
void cut_shapes(nn::Transformer& local, const std::map<std::string, TensorShard>& shards,
                std::set<std::string>* cut = nullptr) {
  for (const nn::Parameter& p : local.parameters()) {
    const auto it = shards.find(p.name);
    if (it == shards.end()) continue;
    *p.tensor = Tensor::unallocated(it->second.local());
    if (cut) cut->insert(p.name);
  }
}

}  // namespace

std::vector<Strategy> strategies(const Mesh& mesh) {
  std::vector<Strategy> out;
  if (mesh.splits(kTensorAxis)) out.push_back(Strategy::kTensor);
  if (mesh.splits(kExpertAxis)) out.push_back(Strategy::kExpert);  // splits the experts as tensor left them
  if (mesh.splits(kPipeAxis)) out.push_back(Strategy::kPipeline);
  if (mesh.splits(kContextAxis)) out.push_back(Strategy::kContext);
  out.push_back(Strategy::kData);  // last, over the model-parallel shards
  return out;
}

ParallelModel parallelize(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config) {
  ModelSplit split;
  std::unique_ptr<PipelineParallel> pipeline;
  std::unique_ptr<ContextParallel> context;
  std::unique_ptr<GradientSync> sync;
  for (const Strategy strategy : strategies(mesh)) {
    switch (strategy) {
      case Strategy::kTensor:
        split.shards = apply_tensor_parallel(model, mesh.axis(kTensorAxis), config.data.seed, tensor_config(config));
        break;
      case Strategy::kExpert: {
        std::shared_ptr<const ExpertParallel> experts =
            apply_expert_parallel(model, mesh.axis(kExpertAxis), config.data.seed, config.precision.activation);
        split.expert_parameters = experts->expert_parameters();
        split.shards = nest(mesh, split.shards, experts);
        break;
      }
      case Strategy::kPipeline:
        pipeline = std::make_unique<PipelineParallel>(model, mesh, pipeline_config(mesh, config), split.shards);
        split.shards = pipeline->shards();
        break;
      case Strategy::kContext:
        context = apply_context_parallel(model, mesh.axis(kContextAxis), context_config(config));
        break;
      case Strategy::kData:
        sync = make_gradient_sync(model, mesh, data_config(config), split);
        break;
    }
  }
  return ParallelModel(split.shards, std::move(pipeline), std::move(context), std::move(sync), config.precision);
}

int64_t pipeline_message_bytes(const nn::ModelConfig& model, const Mesh& mesh, const ParallelConfig& config,
                               const StepShape& step) {
  const PipelineConfig pipeline = pipeline_config(mesh, config);
  const int64_t rows = step.batch / DataAxes::of(mesh).batch->size() / step.microbatches / pipeline.sequence_split;
  return wire_bytes(pipeline.wire, rows * step.seq_len * model.d_model);
}

std::shared_ptr<const ModelShards> parallelize_for_inference(nn::Transformer& model, const Mesh& mesh,
                                                             const ParallelConfig& config) {
  if (mesh.splits(kContextAxis)) {
    throw UserError("decoding runs on the tensor axis; the context axis (" +
                    std::to_string(mesh.axis_size(kContextAxis)) + ") is for training -- use --mesh tensor=N");
  }
  if (mesh.splits(kPipeAxis)) {
    throw UserError("decoding runs on the tensor axis; the pipe axis (" + std::to_string(mesh.axis_size(kPipeAxis)) +
                    ") is for training -- use --mesh tensor=N");
  }
  std::shared_ptr<const ModelShards> shards;
  if (mesh.splits(kTensorAxis)) {
    shards = apply_tensor_parallel(model, mesh.axis(kTensorAxis), config.data.seed, tensor_config(config));
  }
  nn::initialize_unallocated(model, config.data.seed);
  return shards;
}

StepPlan plan_step(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config, const StepShape& step) {
  SL_ASSERT(step.microbatches >= 1, "a step has at least one microbatch");
  const int64_t rows = step.batch / DataAxes::of(mesh).batch->size() / step.microbatches;
  const std::vector<Strategy> applied = strategies(mesh);
  // The data-parallel strategy sees this rank's shards of its pipeline stages: a model of
  // their shapes (built deferred, so it costs nothing) stands in, leaving `model` untouched.
  std::unique_ptr<nn::Transformer> local;
  if (applied.size() > 1) local = nn::deferred_transformer(model.config);
  ModelSplit split;
  for (const Strategy strategy : applied) {
    switch (strategy) {
      case Strategy::kTensor:
        cut_shapes(*local, tensor_shards(model.config, mesh.axis_size(kTensorAxis), mesh.coord(kTensorAxis)));
        break;
      case Strategy::kExpert:  // of the tensor shards
        cut_shapes(*local, expert_shards(*local, mesh.axis_size(kExpertAxis), mesh.coord(kExpertAxis)),
                   &split.expert_parameters);
        break;
      case Strategy::kPipeline: drop_other_stages(*local, mesh, config.pipeline); break;
      case Strategy::kContext:
      case Strategy::kData: break;
    }
  }
  nn::Transformer& sharded = local ? *local : model;
  // In issue order: tensor parallelism's hooks run inside forward and backward, the expert
  // axis's all_to_alls for the MoE layers of this rank's stages, the pipeline's loss and
  // idle-time sums; the data-parallel collectives next on other groups, and the gradient
  // norm's sum over the model-parallel ranks last.
  StepPlan plan;
  for (const Strategy strategy : applied) {
    switch (strategy) {
      case Strategy::kTensor:
        plan_tensor_parallel_step(plan, mesh, model.config, tensor_config(config), rows, step.seq_len, step.microbatches);
        break;
      case Strategy::kExpert: {
        std::vector<int64_t> moe_layers;
        for (size_t l = 0; l < sharded.blocks.size(); ++l) {
          if (sharded.blocks[l]->moe && sharded.blocks[l]->moe->router.weight.defined()) moe_layers.push_back(l);
        }
        plan_expert_parallel_step(plan, mesh, model.config, moe_layers, rows, step.seq_len, step.microbatches,
                                  config.precision.activation);
        break;
      }
      case Strategy::kPipeline: plan_pipeline_step(plan, mesh); break;
      case Strategy::kContext: {
        std::vector<int64_t> layers;  // the blocks this rank runs
        for (size_t l = 0; l < sharded.blocks.size(); ++l) {
          if (sharded.blocks[l]->attn.wqkv.weight.defined()) layers.push_back(static_cast<int64_t>(l));
        }
        plan_context_parallel_step(plan, mesh, model.config, context_config(config), rows, step.seq_len,
                                   step.microbatches, layers);
        break;
      }
      case Strategy::kData: {
        const StepPlan data = plan_gradient_sync(sharded, mesh, data_config(config), split, step.microbatches);
        plan.insert(plan.end(), data.begin(), data.end());
        break;
      }
    }
  }
  std::vector<std::string> model_axes;  // the parameters' shards: the gradient norm sums over them
  for (const char* axis : {kPipeAxis, kExpertAxis, kTensorAxis}) {
    if (mesh.splits(axis)) model_axes.push_back(axis);
  }
  if (!model_axes.empty()) {
    add_planned(plan, mesh, {mesh.group(model_axes).name(), CollectiveOp::kAllReduce, kBytesPerFloat, "gradient norm"});
  }
  return plan;
}

}  // namespace shardlab::parallel
