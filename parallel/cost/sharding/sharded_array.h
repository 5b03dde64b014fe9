// Sharded arrays on a named mesh (the book's chapter 3, "Sharded Matrices"): an array
// A[I_X, J_Y] on a mesh {X: 4, Y: 8} keeps on each device the block its coordinates pick,
// and is replicated over the mesh axes its sharding does not use.
//
//   const NamedMesh mesh = parse_named_mesh("X=2,Y=8,Z=2");
//   const ShardedArray a = shard_array({128, 2048}, "XY,", mesh, 1);   // int8 A[I_XY, J]
//   a.local == {8, 2048}; a.bytes_per_device == 16384; a.replication == 2 (over Z)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/spec/mesh_spec.h"

namespace shardlab::cost {

struct NamedMesh {
  std::vector<parallel::AxisSpec> axes;  // in order, e.g. {{"X", 4}, {"Y", 8}}
  int devices() const;
  int size(const std::string& axis) const;  // UserError for an axis the mesh lacks
};
// "X=4,Y=8": any names, in any order (parallel::parse_axis_sizes); UserError on a bad entry,
// a repeated name or a size below 1.
NamedMesh parse_named_mesh(const std::string& text);

struct ShardedArray {
  std::vector<int64_t> global, local;            // shapes, in elements
  std::vector<std::vector<std::string>> spec;    // per dimension, the mesh axes it is split over
  bool padded = false;                           // some dimension does not divide: blocks are ceil-sized
  int replication = 1;                           // devices holding each block (the unused axes' product)
  double bytes_per_device = 0;
  double total_bytes = 0;                        // over the whole mesh
  std::string describe() const;                  // "A[I_XY, J]"
};

// `spec`: one entry per dimension, comma-separated (PartitionSpec style): empty or "-" for
// a replicated dimension, else mesh axis names joined by '+' ("X+Y"), or written together
// ("XY") when every axis name is one letter. UserError naming the entry when an axis is
// unknown or used twice, or the entries do not match the dimensions.
ShardedArray shard_array(const std::vector<int64_t>& shape, const std::string& spec, const NamedMesh& mesh,
                         double bytes_per_element);

}  // namespace shardlab::cost
