// shardlab-plan network: a GPU cluster's network above the NVLink domain (book chapter
// "gpus"; parallel/cost/network/fat_tree.h) -- the DGX SuperPod fat tree's levels (degree, link
// per child, per-GPU share, collective bandwidth), and a collective over a group of GPUs
// priced level by level, with an inner model-parallel axis, SHARP and oversubscription.
//
//   shardlab-plan network --hw h100
//   shardlab-plan network --hw h100 --gpus 256 --inner 16 --op all_gather --bytes 537e6
#pragma once

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "parallel/cost/network/fat_tree.h"

namespace shardlab::plan {

// "  through one switch: node in 1 GB, out 8 GB (8 x 450 GB/s: 2.22 ms); leaf ...\n": the
// bytes through one switch of each level the collective spans and their time at its
// egress (degree x W_i); empty where the book's accounting counts none (parallel/cost/network/fat_tree.h).
std::string switch_bytes_line(const cost::GpuCollective& c);
// The same per level, for --json: [{level, degree, seconds, switch_in_bytes, switch_out_bytes}].
nlohmann::ordered_json levels_json(const cost::GpuCollective& c);

void add_network_flags(cxxopts::Options& options);
int cmd_network(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
