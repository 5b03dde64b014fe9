// shardlab-plan train: rank the training layouts of a model, batch and chip count (or
// price one with --layout), explain why each loser loses, and -- from plan to run -- print
// the best layout that fits as a train_gpt command (--command) or start it (--run).
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

int cmd_train(const cxxopts::ParseResult& args);

// `shardlab-plan probe-rank key=value ...`: one probing rank that train --probe starts
// (layout_probe.h), not a user's command: times its stand-in and prints
// "period_blocks period head total" (seconds).
int probe_rank_main(int argc, char** argv);

}  // namespace shardlab::plan
