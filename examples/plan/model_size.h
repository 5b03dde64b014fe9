// Models given by a bare size instead of a shape (book transformers.md, inference.md): a
// parameter count (--params, or --param-bytes in the weights' dtype) with the KV cache's
// bytes per token, as `serve` and `infer` take them, and the shape `train` derives from a
// parameter count and a width (model_from in examples/plan/args.h: the layer count follows).
//
//   add_model_flags(o); add_model_size_flags(o);
//   const ServedSizes s = served_from(args, DType::kInt8);  // s.model, s.context, s.shape?
#pragma once

#include <cxxopts.hpp>

#include <optional>
#include <string>

#include "parallel/cost/inference/prefill_decode.h"
#include "parallel/cost/model/transformer.h"

namespace shardlab::plan {

// --params, --param-bytes and --kv-bytes-per-token (a command's --model flags come first).
void add_model_size_flags(cxxopts::Options& o);

// The model served: its shape when given by preset or dimensions (then --params or
// --param-bytes override its parameter count, --kv-bytes-per-token its KV bytes, e.g. the
// book's round 70e9 for LLaMA 3-70B), else the bare sizes, which then need
// --kv-bytes-per-token and --context (UserError naming what is missing).
struct ServedSizes {
  cost::ServedModel model;
  std::optional<cost::TransformerShape> shape;
  std::string description;  // the shape's line, or "30 G params, 100 kB KV per token"
  int64_t context = 0;
  int64_t d = 0, f = 0;  // for the model-sharding sections (0: unknown)
};
ServedSizes served_from(const cxxopts::ParseResult& args, cost::DType weights);

}  // namespace shardlab::plan
