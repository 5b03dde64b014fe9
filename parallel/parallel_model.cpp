#include "parallel/parallel_model.h"

#include <chrono>

#include "parallel/comm/collectives.h"

namespace shardlab::parallel {

ParallelModel::ParallelModel(std::shared_ptr<const ModelShards> shards, std::unique_ptr<PipelineParallel> pipeline,
                             std::unique_ptr<ContextParallel> context, std::unique_ptr<GradientSync> gradient_sync,
                             PrecisionPolicy precision)
    : shards_(std::move(shards)),
      pipeline_(std::move(pipeline)),
      context_(std::move(context)),
      sync_(std::move(gradient_sync)),
      precision_(std::move(precision)) {}

optim::ParamSource ParallelModel::parameters() const {
  return [this] { return sync_->local_parameters(); };
}

optim::SquaredNormReduce ParallelModel::norm_reduction() const {
  return [this](double local) {
    const auto t0 = std::chrono::steady_clock::now();
    float sum = static_cast<float>(local);
    if (const AxisGroup* data_shard = sync_->gradient_shard_group()) all_reduce(*data_shard, {&sum, 1});
    if (shards_) all_reduce(shards_->group(), {&sum, 1});
    norm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(sum);
  };
}

void ParallelModel::gather_full_params() const {
  if (pipeline_) pipeline_->gather_full_params();
  sync_->gather_full_params();
  if (context_) context_->detach();
}

void ParallelModel::release_full_params() const {
  if (context_) context_->attach();
  sync_->release_full_params();
  if (pipeline_) pipeline_->release_full_params();
}

}  // namespace shardlab::parallel
