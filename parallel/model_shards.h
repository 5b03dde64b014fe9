// ModelShards: how a model-parallel strategy (tensor, pipeline or expert parallelism) split the model's parameters, as the data-parallel strategy
// beneath it needs to know: which parameters every rank of the model-parallel group
// holds whole, or in part (they count once in the global gradient norm), and how a local parameter
// maps to its part of the global, unsharded tensor a checkpoint stores.
//
// parallelize() builds one and hands it to the data-parallel strategy; without
// model parallelism there is none and every parameter is global.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "framework/checkpoint.h"
#include "framework/nn/module.h"
#include "framework/tensor.h"
#include "parallel/comm/mesh.h"

namespace shardlab::parallel {

class ModelShards {
 public:
  virtual ~ModelShards() = default;

  // The ranks over which parameters are split: gradient-norm contributions add up over it.
  virtual const AxisGroup& group() const = 0;
  // The element ranges [begin, end) of this rank's local parameter `name` that it counts
  // in the global gradient norm: each element of the global model is counted by exactly
  // one rank of group() (a parameter every rank holds whole, by the first one).
  virtual std::vector<std::pair<int64_t, int64_t>> norm_ranges(const std::string& name) const = 0;

  // Collective over group(), called in the same order on each of its ranks: assembles
  // the global tensor of parameter `param` (or of its optimizer state, `key`) from every
  // rank's local `data` and writes it under `key` where `writer` is not null.
  virtual void write(CheckpointSink* writer, const std::string& key, const std::string& param,
                     std::span<const float> data) const = 0;
  // Reads this rank's part of the global tensor stored under `key` for parameter `param`.
  virtual void read(const CheckpointReader& reader, const std::string& key, const std::string& param,
                    std::span<float> out) const = 0;
};

// How a parameter is split: a rank holds, along `dim`, the concatenation of the global
// index ranges `ranges` (three for tensor parallelism's fused wqkv: its Q, K and V heads;
// one for an expert-parallel block of experts).
struct TensorShard {
  Shape global;
  int dim = 0;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) along dim

  Shape local() const;
  // Calls fn(local_offset, global_offset, count) for each contiguous run of elements,
  // offsets into the row-major local and global tensors.
  template <typename Fn>
  void for_each_run(Fn fn) const;
};

// Replaces p's tensor by this rank's shard, cut from its values or, when p has no storage
// yet (nn::DeferParameters), filled from the initialisers at the global element indices.
void shard_parameter(const nn::Parameter& p, const TensorShard& shard, uint64_t seed);

// Parameters split over one group, every rank its TensorShard of each (equal sizes on
// every rank); the others replicated, counted in the norm by the group's first rank.
// Tensor parallelism (tensor/) and expert parallelism (expert/) are two of these.
class AxisShards : public ModelShards {
 public:
  // `shards_of(r)`: rank r's shard of each split parameter, by name. The global shapes are
  // those of `model`'s parameters now, before the strategy splits them.
  using ShardsOf = std::function<std::map<std::string, TensorShard>(int rank)>;
  AxisShards(const AxisGroup& group, nn::Module& model, const ShardsOf& shards_of);

  const AxisGroup& group() const override { return group_; }
  std::vector<std::pair<int64_t, int64_t>> norm_ranges(const std::string& name) const override;
  void write(CheckpointSink* writer, const std::string& key, const std::string& param,
             std::span<const float> data) const override;
  void read(const CheckpointReader& reader, const std::string& key, const std::string& param,
            std::span<float> out) const override;

  bool split(const std::string& name) const { return shards_[0].contains(name); }
  // This rank's shard of a split parameter.
  const TensorShard& shard(const std::string& name) const { return shards_[group_.rank()].at(name); }
  const Shape& global_shape(const std::string& name) const { return global_shapes_.at(name); }

  // Collective over group() for a split parameter: every rank's `data` of `param` joined
  // into the global tensor, on every rank. A replicated one is `data` itself.
  Tensor assemble(const std::string& param, std::span<const float> data) const;
  // This rank's part of `global`, param's global tensor.
  void cut(const std::string& param, std::span<const float> global, std::span<float> out) const;

 private:
  const AxisGroup& group_;
  std::map<std::string, Shape> global_shapes_;              // every parameter
  std::vector<std::map<std::string, TensorShard>> shards_;  // per rank
};

// Two AxisShards nested: `outer` splits the global tensors, `inner` splits what outer left
// each rank (tensor parallelism cuts each expert's hidden units, then expert parallelism
// the experts along dim 0). A parameter counts in the norm where both count it.
class NestedShards : public ModelShards {
 public:
  NestedShards(const AxisGroup& group, std::shared_ptr<const AxisShards> outer, std::shared_ptr<const AxisShards> inner);

  const AxisGroup& group() const override { return group_; }
  std::vector<std::pair<int64_t, int64_t>> norm_ranges(const std::string& name) const override;
  void write(CheckpointSink* writer, const std::string& key, const std::string& param,
             std::span<const float> data) const override;
  void read(const CheckpointReader& reader, const std::string& key, const std::string& param,
            std::span<float> out) const override;

 private:
  const AxisGroup& group_;  // outer's and inner's axes together
  std::shared_ptr<const AxisShards> outer_, inner_;
};

template <typename Fn>
void TensorShard::for_each_run(Fn fn) const {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= global[d];
  for (size_t d = dim + 1; d < global.size(); ++d) inner *= global[d];
  const Shape l = local();
  for (int64_t o = 0; o < outer; ++o) {
    int64_t along = 0;  // local index along dim
    for (const auto& [begin, end] : ranges) {
      fn((o * l[dim] + along) * inner, (o * global[dim] + begin) * inner, (end - begin) * inner);
      along += end - begin;
    }
  }
}

}  // namespace shardlab::parallel
