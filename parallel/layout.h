// Layout: the degrees of the six mesh axes, validated once against the model and the
// batch, identically on every rank, before the first collective (torchtitan's
// ParallelDims). Every strategy trusts it instead of checking on its own.
//
//   const Layout layout = Layout::from_spec("data=2,tensor=2");
//   layout.validate({.model = config, .global_batch = 32, .microbatches = 2, .zero = 1});
//   Mesh mesh(job, layout.axes);             // the first collective
//
// Each error names the values and the fix, and names no program: the same message serves
// train_gpt, generate and a test.
#pragma once

#include <string>
#include <vector>

#include "framework/nn/config.h"
#include "parallel/comm/mesh.h"
#include "parallel/pipeline/schedule.h"

namespace shardlab::parallel {

// What a layout is checked against.
struct LayoutChecks {
  nn::ModelConfig model;
  int64_t global_batch = 0;  // sequences per step over all data ranks; 0: not checked
  int microbatches = 1;      // gradient-accumulation microbatches per step
  int zero = 0;              // ZeRO stage 0-3
  bool sequence_parallel = false;  // the tensor axis must divide a microbatch's sequences
  bool tp_overlap = false;         // the collective matmul: needs sequence parallelism
  ScheduleKind pipeline_schedule = ScheduleKind::k1F1B;
  int virtual_stages = 1;                // per pipe rank
  std::vector<int64_t> pipeline_layers = {};  // blocks per stage (pipe x virtual of them), or empty
  int64_t seq_len = 0;              // tokens per sequence; 0: not checked
  bool context_load_balance = true;  // the context axis cuts each sequence in 2 x context chunks
  bool int8_gradients = false;       // --reduce-dtype int8: some gradient reduction must span ranks
};

struct Layout {
  std::vector<AxisSpec> axes;  // as given, outermost first
  int data = 1, fsdp = 1, pipe = 1, expert = 1, context = 1, tensor = 1;

  // Parses "data=2,tensor=2" (parse_mesh_spec); axes not named have size 1, and a layout
  // without a data or fsdp axis gets data=1 in front.
  static Layout from_spec(const std::string& spec);
  static Layout from_axes(std::vector<AxisSpec> axes);

  int num_ranks() const { return data * fsdp * pipe * expert * context * tensor; }
  int data_ranks() const { return data * fsdp * expert; }  // ranks that split the batch's rows

  // Throws UserError, naming the values and the fix, for any axis the model or the batch
  // cannot be split over, for a pipeline schedule that cannot run (its checker, too), and
  // for axes whose strategy does not train yet.
  void validate(const LayoutChecks& checks) const;
  // Also checks that the degrees multiply to `num_ranks` (validate_mesh).
  void validate(const LayoutChecks& checks, int num_ranks) const;

  std::string describe() const;  // "data=2,tensor=2"
};

}  // namespace shardlab::parallel
