// shardlab-plan array: an array sharded over a named mesh (book "sharding";
// parallel/cost/sharding/sharded_array.h): its local shape, bytes per device, replication
// and bytes over the mesh; with --hw, the time each device takes to read its shard from HBM.
//
//   shardlab-plan array --shape 128,2048 --spec XY, --mesh X=2,Y=8,Z=2 --dtype int8
//   shardlab-plan array --shape 1024,4096 --spec XY, --mesh X=8,Y=2 --dtype fp32 --hw h100   # 1 MiB, 313 ns
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

void add_array_flags(cxxopts::Options& options);
int cmd_array(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
