#include "parallel/cost/training/zero_memory.h"

namespace shardlab::cost {

double model_shard_params(const ParamCounts& counts, double tensor, double pipe, double expert) {
  const double split = tensor * pipe;
  return (counts.total - counts.experts) / split + counts.experts / (split * expert);
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
