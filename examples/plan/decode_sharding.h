// `shardlab-plan serve`'s decode-time sharding sections (parallel/cost/inference/decode_sharding.h):
// with --expert-shards Z the all-to-alls that route a step's tokens to experts sharded
// [E_Z, D, F_Y] against the weight load; with --kv-shard batch=Z|sequence=Z the KV cache's
// memory per chip and its AllToAlls (or AllGather and ReduceScatter) per step. Each appends
// its lines to the text and its object to the JSON; neither prints without its flag.
//
//   shardlab-plan serve --hw tpu-v5e --model mixtral-8x7b --chips 16 --batch 32 --expert-shards 8
//   shardlab-plan serve --hw tpu-v5e --model llama3-70b --chips 32 --batch 64 --kv-shard batch=4
#pragma once

#include <cxxopts.hpp>

#include <optional>
#include <string>

#include "examples/plan/args.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::plan {

// Adds --expert-shards and --kv-shard to serve's options.
void add_decode_sharding_flags(cxxopts::Options& options);
// The sections the flags ask for, for `shape` (nullopt: a model given by sizes, which
// these need the shape of: UserError saying so) decoded at `batch` and `context` on `chips`.
void decode_sharding_sections(const cxxopts::ParseResult& args, const std::optional<cost::TransformerShape>& shape,
                              int64_t batch, int64_t context, int chips, cost::DType weights,
                              const cost::HardwareProfile& hw, std::string& text, Json& json);

}  // namespace shardlab::plan
