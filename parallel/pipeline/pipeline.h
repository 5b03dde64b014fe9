// Pipeline parallelism over the mesh's `pipe` axis (the book's chapter on training;
// GPipe, Megatron-LM's 1F1B and interleaved schedules, ZB-H1).
//
// The model is cut into S = p * v stages of consecutive blocks; stage 0 also runs the
// embedding, stage S-1 the final norm, the head and the loss. Rank r of the pipe axis
// holds stages r, r + p, ...: it keeps only their parameters (the others are dropped
// from the model, so the data-parallel strategy and the optimizer never see them), and
// every kept parameter starts from the same values as in any other layout.
//
// A step runs the schedule (schedule.h) as it is written: each microbatch's activations
// [rows, T, D] travel forward and their gradients backward by send/recv on the pipe
// axis as [rows, T, D] in PipelineConfig::wire (through the collectives layer, so link
// emulation, the trace and the watchdog see them). The microbatches are gradient accumulation's: --grad-accum m is the pipeline's m.
//
// GPT's tied embedding lives on the first and the last stage; after the schedule their
// two gradients are exchanged and summed, so the tie holds exactly (Megatron's embedding
// group), and the gradient norm counts it once.
//
//   PipelineParallel pp(model, mesh, {.schedule = ScheduleKind::k1F1B, .microbatches = 8}, nullptr);
//   const double loss = pp.forward_backward(batch);  // every pipe rank gets the step's loss
//   dp->finish_gradients(); ...
#pragma once

#include <memory>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/nn/transformer.h"
#include "framework/precision.h"
#include "parallel/comm/comm_trace.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"
#include "parallel/model_shards.h"
#include "parallel/pipeline/schedule.h"

namespace shardlab::parallel {

struct PipelineConfig {
  ScheduleKind schedule = ScheduleKind::k1F1B;
  int virtual_stages = 1;        // v: stages per pipe rank (interleaved)
  int microbatches = 1;          // m: the gradient-accumulation microbatches of a step
  std::vector<int64_t> layers;   // blocks per stage, S of them (--pp-layers); empty: balanced by cost
  // Set by parallelize() under sequence parallelism: the tensor axis's size, over which
  // each activation passed between stages is split by sequences.
  int sequence_split = 1;
  // Set by parallelize() from the precision policy (--activation-dtype): what the
  // activations and their gradients carry between stages, fp32 or bf16 (half the bytes;
  // each value arrives rounded to bf16). The tied embedding's gradient stays fp32.
  DType wire = DType::kF32;
};

// The first block of each stage and, last, n_layers: stage s runs blocks
// [first[s], first[s+1]). Given layers are used as they are (Layout::validate checked
// them); otherwise the split minimises the costliest stage by the cost model's FLOPs
// per block at the full context, the head's projection counted on the last stage.
std::vector<int64_t> stage_boundaries(const nn::ModelConfig& model, int stages, const std::vector<int64_t>& layers);

class PipelineParallel {
 public:
  // Runs the schedule over this data rank's `batch`, cut into config.microbatches, each
  // loss scaled by 1/m; parameter gradients accumulate in .grad() and the tied
  // embedding's are summed. Returns the mean loss over the microbatches on every pipe rank.
  double forward_backward(const data::Batch& batch, CommTrace* trace = nullptr);

  // Every rank gets the whole model in the model's tensors (for evaluation and decoding),
  // each parameter summed over the pipe axis from the rank that holds it, until
  // release_full_params() drops the others' again.
  void gather_full_params();
  void release_full_params();

  // The last step's bubble: the idle fraction of forward_backward's time, averaged over the
  // pipe ranks (measured); and the schedule's (check(): equal compute per stage, free links).
  double bubble() const { return bubble_; }
  double predicted_bubble() const { return prediction_.bubble; }
  // The schedule's simulation (check()): bubble, microbatches in flight per pipe rank.
  const ScheduleCheck& prediction() const { return prediction_; }

  const PipelineSchedule& schedule() const { return schedule_; }
  // What a stage sends the next (an activation, or back its gradient) for one microbatch
  // of a data rank's `rows` sequences of `seq_len` tokens: under sequence parallelism,
  // this rank's sequences of it; and the bytes that travel for it (in PipelineConfig::wire).
  Shape message_shape(int64_t rows, int64_t seq_len) const;
  int64_t message_bytes(int64_t rows, int64_t seq_len) const;
  DType wire() const { return config_.wire; }
  const std::vector<int64_t>& boundaries() const { return first_block_; }
  std::shared_ptr<const ModelShards> shards() const { return shards_; }
  std::string describe() const;

  // Drops the parameters of other ranks' stages from `model`, beneath `inner` (the
  // tensor-parallel shards, or nullptr); shards() replaces `inner` for the data-parallel
  // strategy.
  PipelineParallel(nn::Transformer& model, const Mesh& mesh, const PipelineConfig& config,
                   std::shared_ptr<const ModelShards> inner);

 private:
  struct Placement {  // a parameter of the whole model and the pipe rank whose copy counts
    Tensor* slot;
    Shape shape;
    int holder;
    bool dropped;
  };
  struct InFlight;
  Tensor run_forward(const data::Batch& micro, int stage, const Tensor& input) const;
  void sync_tied_embedding();

  nn::Transformer& model_;
  const AxisGroup& pipe_;
  PipelineConfig config_;
  PipelineSchedule schedule_;
  std::vector<int64_t> first_block_;
  std::vector<Placement> placements_;  // every parameter, in the model's order
  std::shared_ptr<const ModelShards> shards_;
  ScheduleCheck prediction_;
  double bubble_ = 0;
};

// What PipelineParallel's constructor does to the parameters, alone: drops those of other
// ranks' stages from `model` (for planning a step on a deferred model).
void drop_other_stages(nn::Transformer& model, const Mesh& mesh, const PipelineConfig& config);

// The pipe-axis collectives one step adds besides the point-to-point messages of the
// schedule and of the tied embedding (which check() proves match): the loss, summed
// from the last stage to every pipe rank, with the ranks' idle times.
void plan_pipeline_step(StepPlan& plan, const Mesh& mesh);

}  // namespace shardlab::parallel
