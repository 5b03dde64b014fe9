// ModelShards: how a model-parallel strategy (tensor parallelism today; pipeline and
// expert parallelism later) split the model's parameters, as the data-parallel strategy
// beneath it needs to know: which parameters every rank of the model-parallel group
// holds whole, or in part (they count once in the global gradient norm), and how a local parameter
// maps to its part of the global, unsharded tensor a checkpoint stores.
//
// parallelize() builds one and hands it to the data-parallel strategy; without
// model parallelism there is none and every parameter is global.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "framework/checkpoint.h"
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
  virtual void write(CheckpointWriter* writer, const std::string& key, const std::string& param,
                     std::span<const float> data) const = 0;
  // Reads this rank's part of the global tensor stored under `key` for parameter `param`.
  virtual void read(const CheckpointReader& reader, const std::string& key, const std::string& param,
                    std::span<float> out) const = 0;
};

}  // namespace shardlab::parallel
