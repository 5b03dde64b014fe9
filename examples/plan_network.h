// shardlab-plan network: a GPU cluster's network above the NVLink domain (book chapter
// "gpus"; parallel/cost/fat_tree.h) -- the DGX SuperPod fat tree's levels (degree, link
// per child, per-GPU share, collective bandwidth), and a collective over a group of GPUs
// priced level by level, with an inner model-parallel axis, SHARP and oversubscription.
//
//   shardlab-plan network --hw h100
//   shardlab-plan network --hw h100 --gpus 256 --inner 16 --op all_gather --bytes 537e6
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

void add_network_flags(cxxopts::Options& options);
int cmd_network(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
