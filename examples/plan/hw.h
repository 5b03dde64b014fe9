// shardlab-plan hw: the hardware profiles (parallel/cost/hardware/hardware.h) -- without --hw a
// one-line list, with --hw one chip's figures (FLOP/s per dtype, HBM, links; any replaced
// by a flag) and the facts the book tabulates: cores (TensorCores or SMs), clock, VMEM or
// SMEM and L2, MXU size, vector ALUs, PCIe and DCN, then its pod (TPU) or node (GPU):
// hosts, cores, FLOP/s, HBM and price per hour. --clock sets the clock the vector units'
// FLOP/s use; --vector-flops F gives the clock at which they reach F with FMAs.
//
//   shardlab-plan hw --hw tpu-v5e
//   shardlab-plan hw --hw tpu-v5p --clock 1.75e9       # 8192 ALUs x 1.75 GHz = 14.3 TFLOP/s
//   shardlab-plan hw --hw b200 --vector-flops 80e12    # 80e12 / (18944 x 2) = 2.11 GHz
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

void add_hw_flags(cxxopts::Options& options);
int cmd_hw(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
