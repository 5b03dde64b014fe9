// `shardlab-plan matmul --cases N` and `--gather-or-reduce N`: the book's sharded matmuls
// (chapter "sharding") as text and JSON, from parallel/cost/sharding/matmul_cases.h.
//
//   shardlab-plan matmul --hw tpu-v5e --batch 8192 --d-model 8192 --d-ff 8192 --cases 16
//   shardlab-plan matmul --hw tpu-v5p --gather-or-reduce 4              Question 4: W[D_X, F]
//   shardlab-plan matmul --hw tpu-v5p --gather-or-reduce 4 --sharded x  Question 9: X[B, D_X]
#pragma once

#include <string>

#include "examples/plan/args.h"
#include "parallel/cost/sharding/matmul_cases.h"

namespace shardlab::plan {

// The four cases over an axis of `shards` chips, one block each; json gets "cases".
std::string matmul_cases_text(int shards, const cost::MatmulSpec& m, const cost::HardwareProfile& hw, Json& json);

// Gather the sharded operand or multiply the shards and reduce the output, side by side,
// with the D at which each crossover falls; json gets "gather_or_reduce".
std::string gather_or_reduce_text(int shards, cost::ShardedOperand sharded, const cost::MatmulSpec& m,
                                  const cost::HardwareProfile& hw, Json& json);

}  // namespace shardlab::plan
