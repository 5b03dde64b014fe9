#include "examples/plan/decode_sharding.h"

#include "framework/error.h"
#include "parallel/cost/inference/decode_sharding.h"

namespace shardlab::plan {

using namespace shardlab::cost;

void add_decode_sharding_flags(cxxopts::Options& o) {
  o.add_options("decode sharding (models given by shape)")
      ("expert-shards", "Z: experts sharded [E_Z, D, F_Y] over Z chips (Y = chips / Z): price the all-to-alls routing "
                        "each step's tokens against the weight load", cxxopts::value<int>())
      ("kv-shard", "KV cache layout: heads, batch=Z or sequence=Z (Z chips; heads over Y = chips / Z): memory per "
                   "chip and the AllToAlls / AllGather per step", cxxopts::value<std::string>());
}

namespace {

std::string collective_text(const char* op, double bytes, const CollectiveCost& c) {
  return std::string(op) + " of " + human(bytes, "B") + ": " + human(c.seconds, "s") +
         (c.latency_bound ? " (latency-bound)" : "");
}

Json collective_json(const char* op, double bytes, const CollectiveCost& c) {
  return Json{{"op", op}, {"bytes", bytes}, {"seconds", c.seconds}, {"latency_bound", c.latency_bound}};
}

}  // namespace

void decode_sharding_sections(const cxxopts::ParseResult& a, const std::optional<TransformerShape>& shape,
                              int64_t batch, int64_t context, int chips, DType weights, const HardwareProfile& hw,
                              std::string& text, Json& json) {
  if (!a.count("expert-shards") && !a.count("kv-shard")) return;
  if (!shape)
    throw UserError("--expert-shards and --kv-shard need the model's shape; give --model or its dimensions "
                    "(--layers ...) instead of --params");
  if (a.count("expert-shards")) {
    const ExpertShardingDecode e = expert_sharding_decode(*shape, batch, a["expert-shards"].as<int>(), chips, weights, hw);
    text += "expert sharding [E_Z, D, F_Y], Z = " + std::to_string(e.expert_shards) + ", Y = " +
            std::to_string(e.model_shards) + " (" + human(e.experts_per_chip, "") +
            " expert(s) per chip): per MoE layer 2 x " + collective_text("all_to_all", e.dispatch_bytes, e.dispatch) +
            " over Z (dispatch and combine of [B, k, D]); per step " + std::to_string(e.moe_layers) + " x 2 = " + human(e.step_seconds, "s") +
            " against the weight load's " + human(e.weight_seconds, "s") + " (" + human(e.weight_bytes_per_chip, "B") +
            " per chip)\n";
    json["expert_sharding"] = Json{{"expert_shards", e.expert_shards}, {"model_shards", e.model_shards},
                                   {"experts_per_chip", e.experts_per_chip},
                                   {"dispatch", collective_json("all_to_all", e.dispatch_bytes, e.dispatch)},
                                   {"moe_layers", e.moe_layers}, {"all_to_all_seconds_per_step", e.step_seconds},
                                   {"weight_bytes_per_chip", e.weight_bytes_per_chip},
                                   {"weight_seconds", e.weight_seconds}};
  }
  if (a.count("kv-shard")) {
    const DType kv = parse_dtype(a["kv-dtype"].as<std::string>());
    const KvShardingDecode k =
        kv_sharding_decode(*shape, batch, context, parse_kv_layout(a["kv-shard"].as<std::string>()), chips, kv, hw);
    const bool heads = k.layout.over == KvShard::kHeads;
    text += "KV cache sharded " + (heads ? std::string("over") : to_string(k.layout) + " x") + " heads (Y = " +
            std::to_string(k.model_shards) + ", " +
            std::to_string(k.head_shards) + " of K = " + std::to_string(shape->kv_heads) + " head shards): " +
            human(k.kv_bytes_per_chip, "B") + " per chip (heads alone: " + human(k.heads_only_bytes_per_chip, "B") +
            "), read in " + human(k.kv_seconds, "s") + " per step";
    Json j{{"layout", to_string(k.layout)}, {"model_shards", k.model_shards}, {"head_shards", k.head_shards},
           {"kv_bytes", k.kv_bytes}, {"kv_bytes_per_chip", k.kv_bytes_per_chip},
           {"heads_only_kv_bytes_per_chip", k.heads_only_bytes_per_chip}, {"kv_seconds", k.kv_seconds},
           {"collective_seconds_per_layer", k.layer_seconds}, {"collective_seconds_per_step", k.step_seconds}};
    if (!heads) {
      text += "; per layer " + collective_text(k.first_op, k.first_bytes, k.first) + " + " +
              collective_text(k.second_op, k.second_bytes, k.second) + " over Z; per step " +
              std::to_string(shape->layers) + " layers = " + human(k.step_seconds, "s");
      j["collectives"] = Json::array({collective_json(k.first_op, k.first_bytes, k.first),
                                      collective_json(k.second_op, k.second_bytes, k.second)});
    }
    text += "\n";
    json["kv_sharding"] = j;
  }
}

}  // namespace shardlab::plan
