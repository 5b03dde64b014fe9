#include "parallel/runtime/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/memory.h"
#include "framework/nn/transformer.h"
#include "framework/ops/linear_cross_entropy.h"
#include "parallel/cost/model/autograd_activations.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/context/context_parallel.h"
#include "parallel/pipeline/pipeline.h"
#include "parallel/cost/training/zero_memory.h"

namespace shardlab::runtime {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1 << 30));
  return text;
}

// The fused head's chunk of logits for `tokens` rows, or 0 where the head is not fused
// (ops/linear_cross_entropy.h: at most 64 MiB, the whole [tokens, V/t] when that is less).
double fused_head_chunk_bytes(const nn::ModelConfig& model, double tokens, int tensor) {
  const int64_t rows = static_cast<int64_t>(tokens), vocab_rows = model.vocab / tensor;
  if (!nn::fuses_head(model.fused_head, rows, vocab_rows)) return 0.0;
  return std::min<double>(ops::kLinearCrossEntropyChunkBytes, tokens * static_cast<double>(vocab_rows) * sizeof(float));
}

// What pipe rank `stage` holds: the blocks of its stages as the pipeline splits them
// (parallel/pipeline/pipeline.h, stage_boundaries: --pp-layers, or balanced by cost), the
// first stage's embedding and the last stage's head.
cost::StageHolding stage_holding(const RunConfig& run, const parallel::Layout& layout, int stage) {
  if (layout.pipe == 1) return {};
  const int stages = layout.pipe * layout.virtual_stages;
  const std::vector<int64_t> first = parallel::stage_boundaries(run.model, stages, run.pp_layers);
  double blocks = 0, moe_blocks = 0;
  for (int s = stage; s < stages; s += layout.pipe) {  // the rank's virtual stages
    for (int64_t block = first[s]; block < first[s + 1]; ++block) {
      blocks += 1;
      moe_blocks += run.model.is_moe_layer(block) ? 1 : 0;
    }
  }
  const double moe_layers = static_cast<double>(run.model.moe_layers());
  return {.blocks = blocks / static_cast<double>(run.model.n_layers),
          .moe_blocks = moe_layers > 0 ? moe_blocks / moe_layers : 0.0,
          .first = stage == 0,
          .last = stage == layout.pipe - 1};
}

}  // namespace

MemoryEstimate estimate_rank_memory(const RunConfig& run, const parallel::Layout& layout, int stage) {
  cost::TransformerShape shape = cost::shape_of(run.model);
  shape.context = run.sequence_length();
  // One microbatch of this rank's rows, each its T/c positions under the context axis.
  const double rows = static_cast<double>(run.batch) / layout.data_ranks() / layout.microbatches;
  const double tokens = rows * static_cast<double>(run.sequence_length()) / layout.context;
  const cost::ParamCounts counts = cost::count_params(shape);
  const cost::StageHolding holding = stage_holding(run, layout, stage);
  const double local = cost::stage_shard_params(counts, holding, layout.tensor, layout.expert);
  // ZeRO shards as DataAxes does. Accumulating microbatches keeps the whole gradient until the last.
  const bool data_axis = std::any_of(layout.axes.begin(), layout.axes.end(),
                                     [](const parallel::AxisSpec& a) { return a.name == parallel::kDataAxis; });
  const double shards = cost::zero_shard_ranks(layout.data, layout.fsdp, layout.context, layout.fsdp > 1 && data_axis);
  const cost::ZeroShare share = cost::zero_share(local, layout.zero, shards, layout.microbatches != 1,
                                                 static_cast<double>(std::max<int64_t>(1, run.model.n_layers)));
  MemoryEstimate m;  // fp32 parameters and gradients, AdamW's two fp32 moments
  m.params = sizeof(float) * share.params;
  m.grads = sizeof(float) * share.grads;
  m.optimizer = 2 * sizeof(float) * share.optimizer;
  m.buffers = sizeof(float) * share.gathered;
  if ((layout.zero == 1 || layout.zero == 2) && shards > 1) {  // ZeroDataParallel::finish_step (data_parallel/zero.cpp)
    // One gradient bucket at a time (at most --bucket-mb; under expert parallelism the
    // experts' parameters, reduced over other axes, fill buckets of their own): its packed
    // and gathered parameters (under bf16 also the bf16 received, half, and this rank's
    // bf16 slice), beside this rank's slice of the reduced gradient.
    const double experts = layout.expert > 1 ? counts.experts * holding.moe_blocks / (layout.tensor * layout.expert) : 0.0;
    const double bucket = std::min(run.bucket_mb * (1 << 20) / sizeof(float), std::max(local - experts, experts));
    m.staging = sizeof(float) * (bucket * (2 + (run.precision == "bf16" ? 0.5 + 0.5 / shards : 0.0)) + local / shards);
  }
  // What each backward starts beside (the schedule's simulation of the stage; without a pipe
  // axis one microbatch, after earlier microbatches' gradients once a step has several).
  const std::vector<parallel::BackwardMoment> moments = parallel::backward_moments(
      layout.schedule, layout.pipe, layout.virtual_stages, std::max(1, layout.microbatches), stage);
  if (parse_wire_dtype(run.reduce_dtype, "--reduce-dtype") == DType::kInt8) {
    // A residual per reduction (parallel/data_parallel/error_feedback.h): the whole local
    // gradient once per data axis it is reduced over (an upper bound for reduce_scatters).
    const int axes = (layout.data > 1) + (layout.fsdp > 1) + (layout.context > 1);
    m.feedback = sizeof(float) * local * axes;
  }
  const double layers = holding.blocks * static_cast<double>(run.model.n_layers);
  const cost::ActivationQuery query{
      .tokens = tokens,
      .sequence = run.sequence_length(),
      .remat = run.model.remat,
      .tensor = layout.tensor,
      .sequence_parallel = layout.sequence_parallel || layout.tp_overlap,
      .expert = layout.expert,
      .layers = layers,
      .moe_layers = holding.moe_blocks * static_cast<double>(run.model.moe_layers()),
      .embedding = stage == 0,
      .head = stage == layout.pipe - 1,
      .capacity_factor = run.model.capacity_factor,
      // auto: the rounded path's 4 bytes, an upper bound (framework/precision.h)
      .matmul_copy_bytes = run.precision != "bf16"           ? 0.0
                           : run.bf16_matmul == "native" ? 2.0
                                                         : 4.0,
      .deferred_weight_gradients = layout.pipe > 1 && layout.schedule == parallel::ScheduleKind::kZeroBubble,
      .fused_head_chunk_bytes = fused_head_chunk_bytes(run.model, tokens, layout.tensor),
      .context = layout.context,
      .context_allgather = parallel::parse_context_comm(run.cp_comm) == parallel::ContextComm::kAllGather};
  // The estimate is the largest of those moments: the most microbatches in flight, or fewer
  // beside the gradients or the tensors a zero-bubble weight pass still waits for.
  MemoryEstimate largest;
  for (const parallel::BackwardMoment& moment : moments) {
    MemoryEstimate e = m;
    cost::ActivationQuery q = query;
    // The schedule counts a microbatch once per stage it is in on this rank: interleaved, a
    // stage holds 1/v of the rank's blocks.
    q.in_flight = moment.in_flight / static_cast<double>(layout.virtual_stages);
    q.awaiting_weight = moment.awaiting_weight / static_cast<double>(layout.virtual_stages);
    e.grads_held = moment.gradients;
    e.activation_parts = cost::shardlab_activation_bytes(shape, q);
    e.activations = e.activation_parts.peak();
    if (e.total() > largest.total()) largest = e;
  }
  return largest;
}

void check_fits_in_memory(const RunConfig& run, const parallel::Layout& layout) {
  const MemoryEstimate m = estimate_rank_memory(run, layout);
  const double available = machine_memory_bytes();
  if (m.total() <= available) return;
  const bool activations = m.activations >= m.params + m.grads + m.optimizer;
  throw UserError("this run needs at least " + gib(m.total()) + " per rank (parameters, gradients and AdamW state " +
                  gib(m.params + m.grads + m.optimizer) + ", activations " + gib(m.activations) +
                  ") but this machine has " + gib(available) + "; " +
                  (activations ? "lower --batch, --seq-len, --layers or --vocab, or raise --grad-accum or --remat"
                               : "shrink the model (--d-model, --layers, --d-ff, --vocab) or shard it (--zero 3, "
                                 "--mesh tensor=N or pipe=N)"));
}

}  // namespace shardlab::runtime
