#include "examples/support/memory_estimate.h"

#include <cstdio>
#include <string>

#include "framework/error.h"
#include "framework/memory.h"
#include "parallel/cost/transformer.h"

namespace shardlab::cli {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1 << 30));
  return text;
}

}  // namespace

MemoryEstimate estimate_rank_memory(const RunConfig& run, const parallel::Layout& layout) {
  const cost::TransformerShape shape = cost::shape_of(run.model);
  const double model_split = static_cast<double>(layout.tensor) * layout.pipe;
  const double data = layout.data_ranks();
  const double tokens = static_cast<double>(run.batch) / data / run.grad_accum * static_cast<double>(run.sequence_length());
  const cost::TrainingMemory whole = cost::training_memory(shape, tokens, run.model.remat, cost::fp32_training());
  MemoryEstimate m;
  m.params = whole.params / model_split / (run.zero >= 3 ? data : 1);
  m.grads = whole.grads / model_split / (run.zero >= 2 ? data : 1);
  m.optimizer = whole.optimizer / model_split / (run.zero >= 1 ? data : 1);
  // Saved activations of this rank's layers, and the logits with their gradient.
  const double logits = 2.0 * tokens * static_cast<double>(run.model.vocab) * 4 / layout.tensor;
  m.activations = whole.activations / model_split + logits;
  return m;
}

void check_fits_in_memory(const RunConfig& run, const parallel::Layout& layout) {
  const MemoryEstimate m = estimate_rank_memory(run, layout);
  const double available = machine_memory_bytes();
  if (m.total() <= available) return;
  const bool activations = m.activations >= m.params + m.grads + m.optimizer;
  throw UserError("this run needs at least " + gib(m.total()) + " per rank (parameters, gradients and AdamW state " +
                  gib(m.params + m.grads + m.optimizer) + ", activations of one microbatch " + gib(m.activations) +
                  ") but this machine has " + gib(available) + "; " +
                  (activations ? "lower --batch, --seq-len, --layers or --vocab, or raise --grad-accum or --remat"
                               : "shrink the model (--d-model, --layers, --d-ff, --vocab) or shard it (--zero 3, "
                                 "--mesh tensor=N or pipe=N)"));
}

}  // namespace shardlab::cli
