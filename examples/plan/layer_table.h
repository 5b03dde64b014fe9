// shardlab-plan model --per-layer: the chapter "transformers" per-layer table, one row per
// matmul (parallel/cost/model/layer_matmuls.h) with its parameters and training FLOPs per token,
// then each group's sum next to the chapter's closed form and the whole model's
// FLOPs per token (docs/plan_json.md, `model --per-layer`).
//
//   shardlab-plan model --model llama3-70b --per-layer [--json]
#pragma once

#include <cxxopts.hpp>

#include "parallel/cost/model/transformer.h"

namespace shardlab::plan {

// Prints the table for s (text or --json); returns the exit code (0).
int print_layer_table(const cxxopts::ParseResult& args, const cost::TransformerShape& s);

}  // namespace shardlab::plan
