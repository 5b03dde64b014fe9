// shardlab-plan train: rank the training layouts of a model, batch and chip count (or
// price one with --layout), explain why each loser loses, and -- from plan to run -- print
// the best layout that fits as a train_gpt command (--command) or start it (--run).
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

int cmd_train(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
