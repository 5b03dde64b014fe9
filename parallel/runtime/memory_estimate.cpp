#include "parallel/runtime/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "framework/error.h"
#include "framework/memory.h"
#include "parallel/cost/model/autograd_activations.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/training/zero_memory.h"

namespace shardlab::runtime {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1 << 30));
  return text;
}

}  // namespace

MemoryEstimate estimate_rank_memory(const RunConfig& run, const parallel::Layout& layout, int stage,
                                    double in_flight) {
  cost::TransformerShape shape = cost::shape_of(run.model);
  shape.context = run.sequence_length();
  const double data = layout.data_ranks();
  const double tokens = static_cast<double>(run.batch) / data / run.grad_accum * static_cast<double>(run.sequence_length());
  const double local = cost::model_shard_params(cost::count_params(shape), layout.tensor, layout.pipe, layout.expert);
  // ZeRO shards over the fsdp axis where there is one (hybrid: replicas across data), else
  // over the data axis. Accumulating microbatches keeps the whole gradient until the last.
  const double shards = layout.fsdp > 1 ? layout.fsdp : layout.data;
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
              .deferred_weight_gradients = layout.pipe > 1 && run.pp_schedule == "zero-bubble"});
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
