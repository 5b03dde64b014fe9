// shardlab-plan collective: one collective on a torus or switched mesh (book chapters 3 and
// 12) -- its time, hops, latency and bandwidth terms, and the message size below which it
// is latency-bound -- or, with --op send, a point-to-point transfer between two chips of
// the mesh (hops, links, time to the first and the last byte; parallel/cost/network/collective.h).
//
//   shardlab-plan collective --hw tpu-v4p --mesh 4x4x4 --op allgather --bytes 8M --axes 0,1
//   shardlab-plan collective --hw tpu-v5e --mesh 4x4 --op send --from 0,0 --to 3,3 --bytes 16M
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

void add_collective_flags(cxxopts::Options& options);
int cmd_collective(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
