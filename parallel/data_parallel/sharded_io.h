// Checkpoint I/O of flat groups whose slices are spread over a shard group.
//
// Saving gathers one group at a time (never the whole model on one rank) and the rank
// holding the writer writes every parameter of it unsharded under prefix + name; loading
// reads, on every rank, only the elements of its own slice.
#pragma once

#include <span>
#include <string>

#include "framework/checkpoint.h"
#include "parallel/data_parallel/flat_layout.h"
#include "parallel/comm/mesh.h"

namespace shardlab::parallel {

// `slice` is this rank's slice of a flat buffer laid out by `layout`. Collective over `shard`.
void save_sharded(const AxisGroup& shard, const FlatLayout& layout, std::span<const float> slice,
                  const std::string& prefix, CheckpointWriter* writer);
void load_sharded(const CheckpointReader& reader, const FlatLayout& layout, int shard_rank, const std::string& prefix,
                  std::span<float> slice);

}  // namespace shardlab::parallel
