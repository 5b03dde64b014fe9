// shardlab-plan offload: an array offloaded to the host DRAM of a slice, brought to one chip
// over DCN + PCIe or over PCIe + ICI and multiplied there (book "tpus", Question 6;
// parallel/cost/hardware/host_offload.h): each stage's time, the routes pipelined and in sequence.
//
//   shardlab-plan offload --hw tpu-v5e --mesh 4x4 --rows 128K --cols 128K --dtype int8 --batch 8 --to 0,0
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

void add_offload_flags(cxxopts::Options& options);
int cmd_offload(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
