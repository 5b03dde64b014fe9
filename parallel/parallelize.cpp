#include "parallel/parallelize.h"

#include "framework/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/expert/expert_parallel.h"
#include "parallel/fsdp/fsdp.h"
#include "parallel/tensor/tensor_parallel.h"

namespace shardlab::parallel {

namespace {

bool has_axis(const Mesh& mesh, const char* axis) { return mesh.has_axis(axis) && mesh.axis_size(axis) > 1; }
bool has_pipe(const Mesh& mesh) { return has_axis(mesh, "pipe"); }

// Tensor parallelism: how it splits the layers.
std::shared_ptr<const ModelShards> apply_model_parallel(nn::Transformer& model, const Mesh& mesh,
                                                        const ParallelConfig& config) {
  if (!has_axis(mesh, "tensor")) return nullptr;
  return apply_tensor_parallel(model, mesh.axis("tensor"), config.data.seed, config.tensor);
}

// A stage's leader: the rank of its pipe coordinate whose other coordinates are all 0.
bool stage_leader(const Mesh& mesh) {
  for (const char* axis : {"data", "fsdp", "expert", "tensor"}) {
    if (mesh.has_axis(axis) && mesh.coord(axis) != 0) return false;
  }
  return true;
}

}  // namespace

void ParallelModel::gather_full_params() const {
  if (pipeline) pipeline->gather_full_params();
  data->gather_full_params();
}

void ParallelModel::release_full_params() const {
  data->release_full_params();
  if (pipeline) pipeline->release_full_params();
}

std::shared_ptr<const ModelShards> parallelize_for_inference(nn::Transformer& model, const Mesh& mesh,
                                                             const ParallelConfig& config) {
  if (has_pipe(mesh)) {
    throw UserError("decoding runs on the tensor axis; the pipe axis (" + std::to_string(mesh.axis_size("pipe")) +
                    ") is for training -- use --mesh tensor=N");
  }
  auto shards = apply_model_parallel(model, mesh, config);
  nn::initialize_unallocated(model, config.data.seed);
  return shards;
}

ParallelModel parallelize(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config) {
  ParallelModel out;
  DataParallelConfig data = config.data;
  data.model_shards = apply_model_parallel(model, mesh, config);
  if (has_axis(mesh, "expert")) {  // splits the experts as tensor parallelism left them
    std::shared_ptr<const ExpertParallel> experts = apply_expert_parallel(model, mesh.axis("expert"), config.data.seed);
    data.expert_parameters = experts->expert_parameters();
    if (auto tensor = std::dynamic_pointer_cast<const AxisShards>(data.model_shards)) {
      data.model_shards = std::make_shared<NestedShards>(mesh.group({"expert", "tensor"}), tensor, experts);
    } else {
      data.model_shards = experts;
    }
  }
  if (has_pipe(mesh)) {
    PipelineConfig pipeline = config.pipeline;
    if (config.tensor.sequence_parallel && has_axis(mesh, "tensor")) pipeline.sequence_split = mesh.axis_size("tensor");
    out.pipeline = std::make_unique<PipelineParallel>(model, mesh, pipeline, data.model_shards);
    data.model_shards = out.pipeline->shards();
  }
  // FSDP/DP last, over the model-parallel shards.
  out.data = data.zero == 3 ? make_fsdp(model, mesh, data) : make_bucketed_data_parallel(model, mesh, data);
  return out;
}

void save_checkpoint(const Mesh& mesh, const ParallelModel& model, const optim::Optimizer& optimizer,
                     const std::string& path, const std::function<void(CheckpointWriter&)>& finish) {
  const int stages = has_pipe(mesh) ? mesh.axis_size("pipe") : 1;
  const int here = stages > 1 ? mesh.coord("pipe") : 0;
  const bool leader = stage_leader(mesh);
  for (int stage = 0; stage < stages; ++stage) {
    if (stage == here) {
      std::unique_ptr<CheckpointWriter> writer;
      if (leader) {
        const auto mode = stage == 0 ? CheckpointWriter::Mode::kCreate : CheckpointWriter::Mode::kAppend;
        writer = std::make_unique<CheckpointWriter>(path, mode);
      }
      model->save(writer.get(), optimizer);
      if (writer && stages == 1) {
        writer->set_attribute("optimizer_step", optimizer.step_count());
        finish(*writer);
        return writer->commit();
      }
      if (writer) writer->hand_off();
    }
    float token = 0.0f;  // the next stage's leader appends only once this one has closed the file
    if (stages > 1) all_reduce(mesh.axis("pipe"), {&token, 1});
  }
  if (stages > 1 && mesh.rank() == 0) {
    CheckpointWriter writer(path, CheckpointWriter::Mode::kAppend);
    writer.set_attribute("optimizer_step", optimizer.step_count());
    finish(writer);
    writer.commit();
  }
}

void load_checkpoint(const CheckpointReader& reader, const ParallelModel& model, optim::Optimizer& optimizer) {
  model->load(reader, optimizer);
  optimizer.set_step_count(reader.int_attribute("optimizer_step"));
}

StepPlan plan_step(nn::Transformer& model, const Mesh& mesh, const ParallelConfig& config, const StepShape& step) {
  SL_ASSERT(step.microbatches >= 1, "a step has at least one microbatch");
  const int64_t rows = step.batch / DataAxes::of(mesh).all->size() / step.microbatches;
  const bool tensor = mesh.has_axis("tensor") && mesh.axis_size("tensor") > 1;
  StepPlan plan;
  // Tensor parallelism's hooks run inside forward and backward (the pipeline's loss
  // follows them); the data-parallel collectives come next on other groups, and the
  // gradient norm's sum over the model-parallel ranks last.
  plan_tensor_parallel_step(plan, mesh, model.config, config.tensor, rows, step.seq_len, step.microbatches);
  // The data-parallel strategy sees this rank's tensor shards of its pipeline stages: plan
  // it on a model of their shapes (built deferred, so it costs nothing), leaving `model`
  // untouched.
  const bool expert = has_axis(mesh, "expert");
  std::unique_ptr<nn::Transformer> local;
  if (tensor || expert || has_pipe(mesh)) {
    nn::DeferParameters defer;
    local = std::make_unique<nn::Transformer>(model.config);
  }
  ParallelConfig sharded_config = config;
  for (const char* axis : {"tensor", "expert"}) {
    if (!has_axis(mesh, axis)) continue;
    const int size = mesh.axis_size(axis), coord = mesh.coord(axis);
    const auto shards = std::string(axis) == "tensor" ? tensor_shards(model.config, size, coord)
                                                      : expert_shards(*local, size, coord);  // of the tensor shards
    for (const nn::Parameter& p : local->parameters()) {
      const auto it = shards.find(p.name);
      if (it == shards.end()) continue;
      *p.tensor = Tensor::unallocated(it->second.local());
      if (std::string(axis) == "expert") sharded_config.data.expert_parameters.insert(p.name);
    }
  }
  if (has_pipe(mesh)) drop_other_stages(*local, mesh, config.pipeline);
  nn::Transformer& sharded = local ? *local : model;
  // The expert axis's all_to_alls, for the MoE layers of this rank's stages; then the
  // pipeline's loss and idle-time sum.
  std::vector<int64_t> moe_layers;
  for (size_t l = 0; l < sharded.blocks.size(); ++l) {
    if (sharded.blocks[l]->moe && sharded.blocks[l]->moe->router.weight.defined()) moe_layers.push_back(l);
  }
  plan_expert_parallel_step(plan, mesh, model.config, moe_layers, rows, step.seq_len, step.microbatches);
  if (has_pipe(mesh)) plan_pipeline_step(plan, mesh);
  const DataParallelConfig& dp = sharded_config.data;
  const StepPlan data = dp.zero == 3 ? plan_fsdp_step(sharded, mesh, dp, step.microbatches)
                                     : plan_bucketed_step(sharded, mesh, dp);
  plan.insert(plan.end(), data.begin(), data.end());
  if (tensor || expert || has_pipe(mesh)) {
    std::vector<std::string> model_axes;
    if (has_pipe(mesh)) model_axes.push_back("pipe");
    if (expert) model_axes.push_back("expert");
    if (tensor) model_axes.push_back("tensor");
    add_planned(plan, mesh, {mesh.group(model_axes).name(), CollectiveOp::kAllReduce, kBytesPerFloat, "gradient norm"});
  }
  return plan;
}

}  // namespace shardlab::parallel
