#include "parallel/cost/training/zero_memory.h"

namespace shardlab::cost {

double model_shard_params(const ParamCounts& counts, double tensor, double pipe, double expert) {
  const double split = tensor * pipe;
  return (counts.total - counts.experts) / split + counts.experts / (split * expert);
}

double stage_shard_params(const ParamCounts& c, const StageHolding& h, double tensor, double expert) {
  const double blocks = c.total - c.embedding - c.unembedding - c.positions - c.experts;
  double params = blocks * h.blocks / tensor + c.experts * h.moe_blocks / (tensor * expert);
  if (h.first) params += (c.embedding + c.positions) / tensor;
  if (h.last) params += (c.unembedding > 0 ? c.unembedding : h.first ? 0.0 : c.embedding) / tensor;
  return params;
}

ZeroShare zero_share(double params, int stage, double shards, bool grads_whole, double layers) {
  ZeroShare z;
  z.params = stage >= 3 ? params / shards : params;
  z.grads = stage >= 2 && !grads_whole ? params / shards : params;
  z.optimizer = stage >= 1 ? params / shards : params;
  z.gathered = stage >= 3 ? 2 * params / layers : 0;
  return z;
}

double zero_shard_ranks(int data, int fsdp, int context, bool hybrid) {
  return hybrid ? fsdp : static_cast<double>(data) * fsdp * context;
}

}  // namespace shardlab::cost
