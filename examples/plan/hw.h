// shardlab-plan hw: the hardware profiles (parallel/cost/hardware/hardware.h) -- without --hw a
// one-line list, with --hw one chip's figures (FLOP/s per dtype, HBM, links; any replaced
// by a flag) and the facts the book tabulates: cores (TensorCores or SMs), clock, VMEM or
// SMEM and L2, MXU size, vector ALUs, PCIe and DCN, then its pod (TPU) or node (GPU):
// hosts, cores, FLOP/s, HBM and price per hour.
//
//   shardlab-plan hw --hw tpu-v5e
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

int cmd_hw(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
