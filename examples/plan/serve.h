// shardlab-plan serve: serving a model on a slice (book chapters 7-8, "inference" and
// "applied-inference"; parallel/cost/inference/serving.h) -- free HBM after the weights and the
// largest batch at a context, decode step and run totals, queries per second, per-chip
// ICI/HBM/math times of a model-sharded decode matmul and how far sharding can go, the 2D
// weight-stationary MLP, KV eviction per step, prefix caching and how many prefill servers
// each decode server needs (or how many of each a traffic needs); with --expert-shards or
// --kv-shard, the decode-time collectives of experts or KV caches sharded over a second
// axis (examples/plan/decode_sharding.h).
//
// The model is a preset or dimensions (--model, --layers ...), or bare sizes:
//   shardlab-plan serve --hw tpu-v5e --chips 16 --params 30e9 --weights int8 --kv-bytes-per-token 100e3 --context 8192 --batch 4
//   shardlab-plan serve --hw tpu-v5e --chips 16 --model llama3-70b --decode-tokens 512 --qps 100
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

void add_serve_flags(cxxopts::Options& options);
int cmd_serve(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
