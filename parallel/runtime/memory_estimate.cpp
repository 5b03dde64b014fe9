#include "parallel/runtime/memory_estimate.h"

#include <algorithm>
#include <memory>
#include <cstdio>
#include <string>

#include "framework/error.h"
#include "framework/memory.h"
#include "parallel/cost/model/autograd_activations.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/context/context_parallel.h"
#include "parallel/cost/training/zero_memory.h"
#include "parallel/pipeline/pipeline.h"

namespace shardlab::runtime {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1 << 30));
  return text;
}

// The parameters pipe rank `rank` holds before tensor and expert parallelism split them:
// the blocks of its stages (pipeline.h's split; stage s on rank s mod pipe), the
// embeddings on the first stage, the final norm and head on the last -- with GPT's tied
// table, a copy of it there too. Counted on a deferred model: nothing is allocated.
struct StageParams {
  double dense = 0, experts = 0;
};
StageParams stage_params(const RunConfig& run, const parallel::Layout& layout, int rank) {
  const auto model = [&] {
    nn::DeferParameters defer;
    return std::make_unique<nn::Transformer>(run.model);
  }();
  const int stages = layout.pipe * std::max(1, run.pp_virtual);
  const std::vector<int64_t> first = parallel::stage_boundaries(run.model, stages, run.pp_layers);
  StageParams p;
  const auto add = [&](nn::Module& m) {
    for (const nn::Parameter& q : m.parameters()) {
      const double n = static_cast<double>(numel_of(q.tensor->shape()));
      (q.name.find("moe.w_") != std::string::npos || q.name.find("moe.b_") != std::string::npos ? p.experts
                                                                                               : p.dense) += n;
    }
  };
  for (int s = rank; s < stages; s += layout.pipe) {
    for (int64_t b = first[s]; b < first[s + 1]; ++b) add(*model->blocks[b]);
    if (s == 0) {
      add(model->wte);
      if (model->wpe) add(*model->wpe);
    }
    if (s == stages - 1) {
      add(model->norm_f);
      if (model->lm_head) add(*model->lm_head);
      else if (s != 0) add(model->wte);  // the tied table's copy on the last stage
    }
  }
  return p;
}

}  // namespace

MemoryEstimate estimate_rank_memory(const RunConfig& run, const parallel::Layout& layout, int stage,
                                    double in_flight) {
  cost::TransformerShape shape = cost::shape_of(run.model);
  shape.context = run.sequence_length();
  // One microbatch of this rank's rows, each its T/c positions under the context axis.
  const double rows = static_cast<double>(run.batch) / layout.data_ranks() / run.grad_accum;
  const double tokens = rows * static_cast<double>(run.sequence_length()) / layout.context;
  double local = cost::model_shard_params(cost::count_params(shape), layout.tensor, layout.pipe, layout.expert);
  if (layout.pipe > 1) {  // a stage holds its own blocks, and the first and last the embeddings and head
    const StageParams p = stage_params(run, layout, stage);
    local = p.dense / layout.tensor + p.experts / (static_cast<double>(layout.tensor) * layout.expert);
  }
  // ZeRO shards as DataAxes does. Accumulating microbatches keeps the whole gradient until the last.
  const bool data_axis = std::any_of(layout.axes.begin(), layout.axes.end(),
                                     [](const parallel::AxisSpec& a) { return a.name == parallel::kDataAxis; });
  const double shards = cost::zero_shard_ranks(layout.data, layout.fsdp, layout.context, layout.fsdp > 1 && data_axis);
  const cost::ZeroShare share = cost::zero_share(local, run.zero, shards, run.grad_accum != 1,
                                                 static_cast<double>(std::max<int64_t>(1, run.model.n_layers)));
  MemoryEstimate m;  // fp32 parameters and gradients, AdamW's two fp32 moments
  m.params = sizeof(float) * share.params;
  m.grads = sizeof(float) * share.grads;
  m.optimizer = 2 * sizeof(float) * share.optimizer;
  m.buffers = sizeof(float) * share.gathered;
  m.grads_held = run.grad_accum > 1 || layout.pipe > 1;
  const double layers = static_cast<double>(run.model.n_layers) / layout.pipe;
  const int microbatches = std::max(1, run.grad_accum);
  m.activation_parts = cost::shardlab_activation_bytes(
      shape, {.tokens = tokens,
              .sequence = run.sequence_length(),
              .remat = run.model.remat,
              .tensor = layout.tensor,
              .sequence_parallel = run.sequence_parallel || run.tp_overlap,
              .expert = layout.expert,
              .layers = layers,
              .moe_layers = static_cast<double>(run.model.moe_layers()) / layout.pipe,
              .embedding = stage == 0,
              .head = stage == layout.pipe - 1,
              .in_flight = in_flight > 0 ? in_flight : std::min(microbatches, layout.pipe - stage),
              .capacity_factor = run.model.capacity_factor,
              // auto: the rounded path's 4 bytes, an upper bound (framework/precision.h)
              .matmul_copy_bytes = run.precision != "bf16" ? 0.0 : run.bf16_matmul == "native" ? 2.0 : 4.0,
              .deferred_weight_gradients = layout.pipe > 1 && run.pp_schedule == "zero-bubble",
              .context = layout.context,
              .context_allgather = parallel::parse_context_comm(run.cp_comm) == parallel::ContextComm::kAllGather});
  m.activations = m.activation_parts.peak();
  return m;
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
