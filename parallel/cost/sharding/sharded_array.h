// Sharded arrays on a named mesh (the book's chapter 3, "Sharded Matrices"): an array
// A[I_X, J_Y] on a mesh {X: 4, Y: 8} keeps on each device the block its coordinates pick,
// and is replicated over the mesh axes its sharding does not use.
//
//   const NamedMesh mesh = parse_named_mesh("X=2,Y=8,Z=2");
//   const ShardedArray a = shard_array({128, 2048}, "XY,", mesh, 1);   // int8 A[I_XY, J]
//   a.local == {8, 2048}; a.bytes_per_device == 16384; a.replication == 2 (over Z)
//   shard_read_seconds(a, hardware("h100"));   // its shard read from HBM once: 16384 / 3.35e12 s
//   sharded_flops(2.0 * b * d * f, {{'b', "X"}, {'d', "Y"}}, parse_named_mesh("X=4,Y=8,Z=4"));
//       // A[B_X, D_Y] *_D W[D_Y, F]: 2BDF / 32 per device, replicated 4x (Z): 2BDF Z over the mesh
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "parallel/cost/hardware/hardware.h"
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

// The time each device takes to read its shard from HBM once, bytes_per_device / HBM
// bandwidth (the book's Pop Quiz "2D sharding across 1 axis": fp32[1024, 4096] as A[I_XY, J]
// on {X: 8, Y: 2} keeps 1 MiB per H100, about 300 ns at 3.35e12 B/s).
double shard_read_seconds(const ShardedArray& a, const HardwareProfile& hw);

// The FLOPs of an einsum whose dims are split over mesh axes ("transformers", Question 2:
// A[B_X, D_Y] *_D W[D_Y, F] on {X: 4, Y: 8, Z: 4}). Each device computes the block its
// shards select, `flops` over the product of the axes used (2BDF / (X Y)); the axes no dim
// uses compute the same blocks again, so the mesh performs `flops` times their product
// (2BDF Z). It prices no communication: the operands' shards are taken to line up.
struct ShardedFlops {
  double per_device = 0;
  int split = 1;         // the product of the axes the dims use
  int replication = 1;   // the product of the other axes
  double over_mesh = 0;  // per_device x devices
};
// `dim_axes`: per dim letter, its mesh axes written as a spec entry of shard_array ("X", "XY",
// "X+Y"). UserError for an unknown axis or one that splits two dims.
ShardedFlops sharded_flops(double flops, const std::map<char, std::string>& dim_axes, const NamedMesh& mesh);

}  // namespace shardlab::cost
