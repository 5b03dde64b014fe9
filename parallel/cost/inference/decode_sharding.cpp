#include "parallel/cost/inference/decode_sharding.h"

#include <algorithm>
#include <cmath>

#include "framework/error.h"
#include "parallel/cost/inference/prefill_decode.h"

namespace shardlab::cost {
namespace {

// Y = chips / Z, or UserError naming both and a Z that divides.
int model_axis(int chips, int shards, const char* what) {
  if (shards < 1 || chips < 1 || chips % shards != 0)
    throw UserError(std::string(what) + " " + std::to_string(shards) + " must divide the slice's " +
                    std::to_string(chips) + " chips (Y x Z); give --chips a multiple of it or another " + what);
  return chips / shards;
}

double ceil_div(int64_t n, int z) { return std::ceil(static_cast<double>(n) / z); }

}  // namespace

ExpertShardingDecode expert_sharding_decode(const TransformerShape& s, int64_t batch, int expert_shards, int chips,
                                            DType weights, const HardwareProfile& hw, DType activations) {
  if (s.experts < 1) throw UserError("expert sharding needs a model with experts; give --experts E and --top-k k");
  if (batch < 1) throw UserError("decode batch must be at least 1 sequence, got " + std::to_string(batch));
  ExpertShardingDecode e;
  e.expert_shards = expert_shards;
  e.model_shards = model_axis(chips, expert_shards, "--expert-shards");
  if (s.experts % expert_shards != 0)
    throw UserError("--expert-shards " + std::to_string(expert_shards) + " must divide the " +
                    std::to_string(s.experts) + " experts (E_Z)");
  e.experts_per_chip = static_cast<double>(s.experts) / expert_shards;
  e.dispatch_bytes = static_cast<double>(batch) * static_cast<double>(s.top_k) * static_cast<double>(s.d_model) *
                     bytes_of(activations);
  e.dispatch = collective_cost(CollectiveOp::kAllToAll, e.dispatch_bytes, {expert_shards}, hw);
  e.moe_layers = s.moe_layers();
  e.step_seconds = 2.0 * static_cast<double>(e.moe_layers) * e.dispatch.seconds;
  e.weight_bytes_per_chip = count_params(s).total * bytes_of(weights) / chips;
  e.weight_seconds = e.weight_bytes_per_chip / hw.hbm_bandwidth;
  return e;
}

KvLayout parse_kv_layout(const std::string& text) {
  const std::string hint = "; give heads, batch=Z or sequence=Z (Z chips of the slice's Z axis)";
  if (text == "heads") return {};
  const size_t eq = text.find('=');
  const std::string kind = text.substr(0, eq);
  if (eq == std::string::npos || (kind != "batch" && kind != "sequence"))
    throw UserError("--kv-shard '" + text + "' is not a KV layout" + hint);
  const double z = parse_size(text.substr(eq + 1), "kv-shard");
  if (!(z >= 1) || z != std::floor(z)) throw UserError("--kv-shard '" + text + "': Z must be a whole number >= 1" + hint);
  return {kind == "batch" ? KvShard::kBatch : KvShard::kSequence, static_cast<int>(z)};
}

std::string to_string(const KvLayout& l) {
  if (l.over == KvShard::kHeads) return "heads";
  return std::string(l.over == KvShard::kBatch ? "batch=" : "sequence=") + std::to_string(l.shards);
}

KvShardingDecode kv_sharding_decode(const TransformerShape& s, int64_t batch, int64_t context, const KvLayout& layout,
                                    int chips, DType kv, const HardwareProfile& hw, DType activations) {
  if (batch < 1 || context < 1)
    throw UserError("KV sharding needs batch and context >= 1, got " + std::to_string(batch) + " and " +
                    std::to_string(context));
  KvShardingDecode k;
  k.layout = layout;
  const int z = layout.over == KvShard::kHeads ? 1 : layout.shards;
  k.model_shards = model_axis(chips, z, "--kv-shard Z");
  k.head_shards = static_cast<int>(std::min<int64_t>(k.model_shards, s.kv_heads));
  const double per_token = served_model(s, kv).kv_bytes_per_token;
  const double b = static_cast<double>(batch), t = static_cast<double>(context);
  k.kv_bytes = b * t * per_token;
  k.heads_only_bytes_per_chip = k.kv_bytes / static_cast<double>(std::min<int64_t>(chips, s.kv_heads));
  const double kept = layout.over == KvShard::kBatch      ? ceil_div(batch, z) * t
                      : layout.over == KvShard::kSequence ? b * ceil_div(context, z)
                                                          : b * t;
  k.kv_bytes_per_chip = kept * per_token / k.head_shards;
  k.kv_seconds = k.kv_bytes_per_chip / hw.hbm_bandwidth;
  if (layout.over == KvShard::kHeads) return k;

  const double q = b * static_cast<double>(s.heads * s.head_dim) * bytes_of(activations) / k.model_shards;
  if (layout.over == KvShard::kBatch) {
    k.first_op = k.second_op = "all_to_all";
    k.first_bytes = k.second_bytes = q;
    k.first = k.second = collective_cost(CollectiveOp::kAllToAll, q, {z}, hw);
  } else {
    k.first_op = "all_gather", k.second_op = "reduce_scatter";
    k.first_bytes = q;
    k.second_bytes = q + b * static_cast<double>(s.heads) * 2 * bytes_of(DType::kFp32) / k.model_shards;
    k.first = collective_cost(CollectiveOp::kAllGather, k.first_bytes, {z}, hw);
    k.second = collective_cost(CollectiveOp::kReduceScatter, k.second_bytes, {z}, hw);
  }
  k.layer_seconds = k.first.seconds + k.second.seconds;
  k.step_seconds = static_cast<double>(s.layers) * k.layer_seconds;
  return k;
}

}  // namespace shardlab::cost
