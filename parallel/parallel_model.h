// ParallelModel: the one object a training loop holds, whatever the layout. parallelize()
// (parallelize.h) builds it; it owns what the strategies made of the model:
//
//   shards()         how tensor, expert and pipeline parallelism split the parameters
//                    (model_shards.h); nullptr without model parallelism
//   pipeline()       the pipe axis's schedule executor (pipeline/pipeline.h), or nullptr
//   context()        the context axis's sequence split (context/context_parallel.h), or
//                    nullptr; sequence_slice() cuts a batch of whole rows to this rank's part
//   gradient_sync()  the data-parallel strategy (data_parallel/gradient_sync.h): DDP,
//                    ZeRO-1/2 or FSDP, a reducer and a sharded store
//   parameters()     the views this rank's optimizer updates
//   norm_reduction() clipping's global gradient norm over every shard
//   precision()      the mixed-precision policy (framework/precision.h); compute_scope()
//                    applies it to the forward and backward passes run in its scope
//
// Checkpoint files are written and read from it by checkpoint/distributed_checkpoint.h;
// one optimizer step over it is train_step (train_step.h), which reads as llm.c's loop:
//
//   ParallelModel parallel = parallelize(model, mesh, config);
//   optim::AdamW optimizer(parallel.parameters(), {.weight_decay = 0.1f});  // this rank's views
//   for (...) {
//     const PrecisionScope precision = parallel.compute_scope();   // bf16 matmuls under a bf16 policy
//     {
//       auto no_sync = parallel.no_sync();   // accumulate locally
//       for (int i = 0; i + 1 < k; ++i) { parallel.begin_microbatch(); loss(i).backward(); }
//     }
//     parallel.begin_microbatch(); loss(k - 1).backward();  // reduces as buckets fill
//     parallel.finish_gradients();
//     optim::clip_grad_norm(optimizer.views(), 1.0, parallel.norm_reduction());
//     optimizer.step(lr);
//     parallel.finish_step();
//     parallel.zero_grad();
//   }
//
// It neither copies nor moves (the optimizer's sources point into it); parallelize()
// returns it by guaranteed copy elision.
#pragma once

#include <memory>
#include <string>

#include "framework/precision.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "parallel/context/context_parallel.h"
#include "parallel/data_parallel/gradient_sync.h"
#include "parallel/model_shards.h"
#include "parallel/pipeline/pipeline.h"

namespace shardlab::parallel {

class ParallelModel {
 public:
  ParallelModel(std::shared_ptr<const ModelShards> shards, std::unique_ptr<PipelineParallel> pipeline,
                std::unique_ptr<ContextParallel> context, std::unique_ptr<GradientSync> gradient_sync,
                PrecisionPolicy precision);
  ParallelModel(const ParallelModel&) = delete;
  ParallelModel& operator=(const ParallelModel&) = delete;

  const ModelShards* shards() const { return shards_.get(); }
  PipelineParallel* pipeline() const { return pipeline_.get(); }
  const ContextParallel* context() const { return context_.get(); }
  // This rank's part of a batch of this rank's rows: under context parallelism its
  // positions of each row, otherwise the batch itself.
  data::Batch sequence_slice(const data::Batch& batch) const { return context_ ? context_->slice(batch) : batch; }
  GradientSync& gradient_sync() const { return *sync_; }
  const PrecisionPolicy& precision() const { return precision_; }
  // While alive, this thread's ops compute in the policy's precision: training steps,
  // evaluation and decoding open one.
  [[nodiscard]] PrecisionScope compute_scope() const { return PrecisionScope(precision_.compute_precision()); }

  // The optimizer's source (optim::ParamSource): this rank's parameter elements and their
  // averaged gradients.
  optim::ParamSource parameters() const;
  // optim::clip_grad_norm's reduction: the squared norm summed over the ranks that shard
  // the gradients over the data axes, then over the model-parallel group. Collective; its
  // time counts as exposed communication.
  optim::SquaredNormReduce norm_reduction() const;

  // While a NoSync is alive, backward passes leave their gradients on this rank (PyTorch
  // DDP's no_sync): gradient accumulation's earlier microbatches, a pipeline's schedule.
  // finish_gradients() then reduces them.
  class [[nodiscard]] NoSync {
   public:
    explicit NoSync(GradientSync& sync) : sync_(&sync) { sync_->set_sync(false); }
    ~NoSync() { sync_->set_sync(true); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    GradientSync* sync_;
  };
  NoSync no_sync() const { return NoSync(*sync_); }

  // Before each microbatch's forward.
  void begin_microbatch() const { sync_->begin_microbatch(); }
  // Waits for the gradient reductions: the gradients are then the mean over data ranks.
  void finish_gradients() const { sync_->finish_gradients(); }
  // After the optimizer's update: ZeRO-1/2 gather the updated parameters.
  void finish_step() const { sync_->finish_step(); }
  void zero_grad() const { sync_->zero_grad(); }

  // The whole model in the model's tensors on every rank, for evaluation and decoding,
  // until release_full_params(); under context parallelism every rank then runs whole
  // sequences.
  void gather_full_params() const;
  void release_full_params() const;

  // Seconds this rank has been blocked on data-parallel communication and the norm's
  // reduction since it was made.
  double exposed_comm_seconds() const { return sync_->exposed_comm_seconds() + norm_seconds_; }
  std::string describe() const { return sync_->describe(); }

 private:
  std::shared_ptr<const ModelShards> shards_;
  std::unique_ptr<PipelineParallel> pipeline_;
  std::unique_ptr<ContextParallel> context_;
  std::unique_ptr<GradientSync> sync_;
  PrecisionPolicy precision_;
  mutable double norm_seconds_ = 0;  // blocked in norm_reduction()
};

}  // namespace shardlab::parallel
