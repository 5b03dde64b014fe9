// Layout: how one training step is split over the ranks -- the degrees of the six mesh axes
// and what runs beside them (microbatches, ZeRO stage, sequence parallelism, the pipeline
// schedule) -- shared by the runtime and the cost model: train_gpt builds one from its
// flags (runtime::RunConfig::layout) and trains it, the cost model prices one
// (cost::estimate_train_step), and the planner proposes them. Validated once against the
// model and the batch, identically on every rank, before the first collective
// (torchtitan's ParallelDims); every strategy trusts it instead of checking on its own.
//
//   Layout layout = Layout::from_spec("data=2,tensor=2");
//   layout.microbatches = 2;
//   layout.zero = 1;
//   layout.validate({.model = config, .global_batch = 32});
//   Mesh mesh(job, layout.axes);             // the first collective
//
//   cost::estimate_train_step(config, Layout{.fsdp = 64, .tensor = 4}, hw);   // no mesh
//
// Each error names the values and the fix, and names no program: the same message serves
// train_gpt, generate and a test. No MPI here: the `cost` library uses the type too.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "framework/nn/config.h"
#include "parallel/spec/mesh_spec.h"
#include "parallel/pipeline/schedule.h"

namespace shardlab::parallel {

// What a layout is checked against: the model and the batch it trains.
struct LayoutChecks {
  nn::ModelConfig model;
  int64_t global_batch = 0;  // sequences per step over all data ranks; 0: not checked
  std::vector<int64_t> pipeline_layers = {};  // blocks per stage (pipe x virtual of them), or empty
  int64_t seq_len = 0;              // tokens per sequence; 0: not checked
  bool context_load_balance = true;  // the context axis cuts each sequence in 2 x context chunks
  bool int8_gradients = false;       // --reduce-dtype int8: some gradient reduction must span ranks
};

struct Layout {
  // The mesh: each axis's degree. The cost model nests them outermost first in this order
  // (cost/training/train_step.h); the runtime's mesh in the order of `axes`.
  int data = 1, fsdp = 1, context = 1, pipe = 1, expert = 1, tensor = 1;
  // Beside the mesh (train_gpt's --grad-accum, --zero, --sequence-parallel, --tp-overlap,
  // --pp-schedule and --pp-virtual).
  int microbatches = 1;            // gradient-accumulation / pipeline microbatches per step
  int zero = 0;                    // ZeRO stage 0-3 of the data axis; an fsdp or context axis is ZeRO-3 whatever it says
  bool sequence_parallel = false;  // the tensor axis also splits norms and residuals (Megatron's SP)
  bool tp_overlap = false;         // the collective matmul: needs sequence parallelism
  ScheduleKind schedule = ScheduleKind::k1F1B;  // the pipe axis
  int virtual_stages = 1;          // interleaved: stages per pipe rank
  // The runtime's mesh as given, outermost first (from_spec, from_axes); empty in a layout
  // the cost model or the planner builds from degrees alone.
  std::vector<AxisSpec> axes = {};

  // Parses "data=2,tensor=2" (parse_mesh_spec); axes not named have size 1, and a layout
  // without a data or fsdp axis gets data=1 in front.
  static Layout from_spec(const std::string& spec);
  static Layout from_axes(std::vector<AxisSpec> axes);

  // The degree of the axis named `name` (kAxisNames); nullptr for a name that is no axis.
  // (Inline: the cost library, which holds no layout.cpp, names axes too.)
  const int* degree(const std::string& name) const {
    return name == kDataAxis ? &data : name == kFsdpAxis ? &fsdp : name == kPipeAxis ? &pipe
         : name == kExpertAxis ? &expert : name == kContextAxis ? &context : name == kTensorAxis ? &tensor : nullptr;
  }
  int* degree(const std::string& name) { return const_cast<int*>(std::as_const(*this).degree(name)); }

  int num_ranks() const { return data * fsdp * pipe * expert * context * tensor; }
  int data_ranks() const { return data * fsdp * expert; }  // ranks that split the batch's rows

  // Throws UserError, naming the values and the fix, for any axis the model or the batch
  // cannot be split over, for a pipeline schedule that cannot run (its checker, too), and
  // for axes whose strategy does not train yet.
  void validate(const LayoutChecks& checks) const;
  // Also checks that the degrees multiply to `num_ranks` (validate_mesh).
  void validate(const LayoutChecks& checks, int num_ranks) const;

  std::string describe() const;  // the mesh: "data=2,tensor=2"
};

}  // namespace shardlab::parallel
