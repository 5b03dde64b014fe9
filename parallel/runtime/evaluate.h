// Periodic evaluation: mean held-out loss over a fixed set of batches, and the task
// metric (exact-match accuracy of arithmetic answers) where the data has one.
#pragma once

#include "parallel/runtime/data_source.h"
#include "framework/nn/transformer.h"

namespace shardlab::runtime {

struct EvalResult {
  double loss = 0.0;
  double accuracy = -1.0;  // -1: the data has no task metric
};

EvalResult evaluate(const nn::Transformer& model, const DataSource& data, const RunConfig& run);

}  // namespace shardlab::runtime
