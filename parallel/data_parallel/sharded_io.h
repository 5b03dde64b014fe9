// Checkpoint I/O for data-parallel strategies: every tensor a checkpoint stores is
// unsharded, whatever the layout.
//
// ParamIO writes and reads one parameter-shaped tensor (a parameter or its optimizer
// state): straight through, or -- under model parallelism -- through ModelShards, which
// assembles the global tensor from the model-parallel group and reads back this rank's
// part. save_sharded / load_sharded do the same for flat groups whose slices are spread
// over a shard group: saving gathers one group at a time (never the whole model on one
// rank); loading reads, on every rank, only the elements of its own slice.
//
// Who writes: every rank whose data rank is 0 calls the writes, in the same order (one
// such rank per model-parallel coordinate); only the one holding the writer writes.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "framework/checkpoint.h"
#include "optim/optimizer.h"
#include "parallel/comm/mesh.h"
#include "parallel/data_parallel/flat_layout.h"
#include "parallel/model_shards.h"

namespace shardlab::parallel {

class ParamIO {
 public:
  explicit ParamIO(std::shared_ptr<const ModelShards> shards = nullptr) : shards_(std::move(shards)) {}

  // Collective over the model-parallel group, if any. `shape` is the local one.
  void write(CheckpointSink* writer, const std::string& key, const std::string& param, const Shape& shape,
             std::span<const float> data) const;
  void read(const CheckpointReader& reader, const std::string& key, const std::string& param, const Shape& shape,
            std::span<float> out) const;
  // Elements [offset, offset + out.size()) of the local tensor.
  void read_range(const CheckpointReader& reader, const std::string& key, const std::string& param,
                  const Shape& shape, int64_t offset, std::span<float> out) const;

  // Appends elements [offset, offset + value.size()) of parameter `param`'s local tensor,
  // with their gradient (empty, or of the same size), as optimizer views: split where
  // whether this rank counts them in the gradient norm changes (ModelShards::norm_ranges;
  // all counted without one).
  void add_views(optim::ParamViews& out, const std::string& param, std::span<float> value, std::span<float> grad,
                 int64_t offset, bool decay) const;

 private:
  std::shared_ptr<const ModelShards> shards_;
};

// `slice` is this rank's slice of a flat buffer laid out by `layout`. Collective over
// `shard`; `writes` on the ranks whose data rank is 0.
void save_sharded(const AxisGroup& shard, const FlatLayout& layout, std::span<const float> slice,
                  const std::string& prefix, const ParamIO& io, bool writes, CheckpointSink* writer);
void load_sharded(const CheckpointReader& reader, const FlatLayout& layout, int shard_rank, const std::string& prefix,
                  const ParamIO& io, std::span<float> slice);

// The optimizer's state of kind `kind` for the views that lie in `layout`, moved between
// the optimizer and `flat`, which holds the layout's elements [lo, lo + flat.size()):
// pack_state writes them into `flat` (zero elsewhere), unpack_state reads them back.
void pack_state(const optim::Optimizer& optimizer, const std::string& kind, const FlatLayout& layout, int64_t lo,
                std::span<float> flat);
void unpack_state(const optim::Optimizer& optimizer, const std::string& kind, const FlatLayout& layout, int64_t lo,
                  std::span<const float> flat);

// Every kind of `optimizer`'s state for this rank's slice of `layout`, as optim/<kind>/<name>:
// saved through save_sharded (collective over `shard`) and loaded through load_sharded.
void save_sharded_state(const AxisGroup& shard, const FlatLayout& layout, const optim::Optimizer& optimizer,
                        const ParamIO& io, bool writes, CheckpointSink* writer);
void load_sharded_state(const CheckpointReader& reader, const FlatLayout& layout, int shard_rank, const ParamIO& io,
                        const optim::Optimizer& optimizer);

}  // namespace shardlab::parallel
