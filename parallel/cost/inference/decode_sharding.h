// Decode-time collectives beyond model sharding (book "inference": Sharding the KV cache,
// Question 6): the all-to-alls that route tokens to sharded experts, and the AllToAlls or
// AllGather a KV cache costs when it is sharded over the batch or the sequence rather than
// over its K heads alone. Each is priced per layer and per decode step on the torus
// (network/collective.h) and set beside what it buys: the weight or KV bytes each chip reads.
//
// Dimension letters: B batch (sequences decoded together), T context (KV length), D model
// width, F MLP width, N query heads, K KV heads, H head dim, E experts, k experts per token,
// L layers; Y the model (head / F) axis, Z the expert, batch or sequence axis; a = bytes of
// an activation. The slice is Y x Z chips, Z its own torus axis.
//
//   ExpertShardingDecode e = expert_sharding_decode(shape, 1, 16, 128, DType::kInt8, hardware("tpu-v5e"));
//   // e.step_seconds (128 all-to-alls, latency-bound) against e.weight_seconds 2.04 ms
//   KvShardingDecode k = kv_sharding_decode(shape, 64, 8192, {KvShard::kBatch, 4}, 16, DType::kInt8, hw);
#pragma once

#include <cstdint>
#include <string>

#include "parallel/cost/model/transformer.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {

// Expert sharding at decode (Question 6): W_in[E_Z, D_X, F_Y], the experts over Z and each
// expert's F over Y (X is FSDP in training only, 1 here). Every MoE layer routes the batch's
// B k token copies to their experts' Z shard and back:
//   dispatch = AllToAll_Z of [B, k, D] (V = B k D a), combine = the same back
// (the F_Y partial sums' reduction is the model-sharded matmul's own, generation_sharding).
// Against that, the busiest chip's weight load per step: all weights / chips (each chip
// holds E/Z experts' F/Y slices and loads its shard once any token picks one of them).
struct ExpertShardingDecode {
  int expert_shards = 0;           // Z
  int model_shards = 0;            // Y = chips / Z
  double experts_per_chip = 0;     // E / Z
  double dispatch_bytes = 0;       // V of one all_to_all
  CollectiveCost dispatch;         // one all_to_all over Z (combine costs the same)
  int64_t moe_layers = 0;
  double step_seconds = 0;         // 2 x moe_layers x dispatch
  double weight_bytes_per_chip = 0;
  double weight_seconds = 0;       // weight_bytes_per_chip / W_hbm
};
// UserError unless the shape has experts, Z divides `chips` and E, and batch >= 1.
ExpertShardingDecode expert_sharding_decode(const TransformerShape& shape, int64_t batch, int expert_shards,
                                            int chips, DType weights, const HardwareProfile& hw,
                                            DType activations = DType::kBf16);

// How the KV cache KV[2, B, T, K, H] is split over the slice (inference.md):
//   heads     KV[2, B, T, K_Y, H] over all chips (Y = chips; past K heads each KV head is
//             replicated Y / K times): no collective of its own.
//   batch     KV[2, B_Z, T, K_Y, H]: per attention layer Q[B, N_YZ, H] -> Q[B_Z, N_Y, H] and
//             the output back, two AllToAll_Z of V = B N H a / Y each (the book's
//             algorithm, steps 4 and 9).
//   sequence  KV[2, B, T_Z, K_Y, H]: AllGather_Z of Q[B, N_YZ, H] (V = B N H a / Y), then each
//             shard's partial output and its softmax max and sum (fp32) are combined
//             flash-style and scattered back to N_YZ: a ReduceScatter_Z of
//             V = B N (H a + 8) / Y.
// Memory per chip: ceil(B / Z) (batch) or ceil(T / Z) (sequence) of the cache, over
// min(Y, K) head shards; its read per step is that / W_hbm.
enum class KvShard { kHeads, kBatch, kSequence };
struct KvLayout {
  KvShard over = KvShard::kHeads;
  int shards = 1;  // Z (1 for heads)
};
// "heads", "batch=4", "sequence=8": UserError naming the text and the forms it takes.
KvLayout parse_kv_layout(const std::string& text);
std::string to_string(const KvLayout& layout);  // the same forms

struct KvShardingDecode {
  KvLayout layout;
  int model_shards = 0;            // Y = chips / Z
  int head_shards = 0;             // min(Y, K)
  double kv_bytes = 0;             // the whole batch's cache
  double kv_bytes_per_chip = 0;
  double heads_only_bytes_per_chip = 0;  // the same cache sharded over its heads alone
  double kv_seconds = 0;           // kv_bytes_per_chip / W_hbm, per step
  const char* first_op = "";       // "all_to_all" (batch) or "all_gather" (sequence); "" for heads
  const char* second_op = "";      // "all_to_all" or "reduce_scatter"
  double first_bytes = 0, second_bytes = 0;  // V of each
  CollectiveCost first, second;
  double layer_seconds = 0;        // first + second
  double step_seconds = 0;         // L x layer
};
// UserError unless Z divides `chips` and batch, context >= 1.
KvShardingDecode kv_sharding_decode(const TransformerShape& shape, int64_t batch, int64_t context,
                                    const KvLayout& layout, int chips, DType kv, const HardwareProfile& hw,
                                    DType activations = DType::kBf16);

}  // namespace shardlab::cost
