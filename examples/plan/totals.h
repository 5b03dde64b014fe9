// shardlab-plan totals: a whole training run from a parameter count (or a model) and a
// token count -- 6PT FLOPs (plus attention with --attention), the cluster's FLOP/s, days
// at an MFU, training state per parameter, memory per chip, the minimum chips that hold
// it and the largest model pure data parallelism trains (book chapters 4-6;
// parallel/cost/training/run_totals.h).
//
//   shardlab-plan totals --params 70e9 --tokens 15e12 --hw tpu-v5p --chips 8960 --mfu 0.4
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

void add_totals_flags(cxxopts::Options& options);
int cmd_totals(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
