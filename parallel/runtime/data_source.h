// The data a run trains and evaluates on, chosen by --data.
//
// "arithmetic" is the embedded task (no download), with a held-out split and an
// exact-match metric; any other value is a path to an llm.c .bin shard (by its name) or
// a text file, read as bytes or, with --tokenizer, encoded by that tokenizer at load;
// evaluated on the loss of its later rows.
#pragma once

#include <memory>
#include <optional>

#include "parallel/runtime/run_config.h"
#include "framework/data/arithmetic.h"
#include "framework/data/dataset.h"

namespace shardlab::runtime {

struct DataSource {
  std::shared_ptr<const data::Dataset> train, heldout;
  std::optional<data::ArithmeticTask> task;  // set for the arithmetic data
};

// UserError when the file is missing or bad, or its tokens do not fit the model's vocab.
DataSource open_data(const RunConfig& run);

}  // namespace shardlab::runtime
