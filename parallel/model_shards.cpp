#include "parallel/model_shards.h"

#include <algorithm>
#include <cstring>

#include "framework/error.h"
#include "framework/memory.h"
#include "parallel/comm/collectives.h"

namespace shardlab::parallel {

Shape TensorShard::local() const {
  Shape s = global;
  s[dim] = 0;
  for (const auto& [begin, end] : ranges) s[dim] += end - begin;
  return s;
}

void shard_parameter(const nn::Parameter& p, const TensorShard& shard, uint64_t seed) {
  SL_ASSERT(p.tensor->shape() == shard.global, "shard of " + p.name + " expects shape " + shape_str(shard.global) +
                                                   ", got " + shape_str(p.tensor->shape()));
  Tensor local;
  {
    MemoryScope scope(MemoryCategory::Parameters);
    local = Tensor::zeros(shard.local());
  }
  const bool allocated = p.tensor->has_storage();
  shard.for_each_run([&](int64_t lo, int64_t go, int64_t count) {
    if (allocated) std::memcpy(local.data() + lo, p.tensor->data() + go, count * sizeof(float));
    else nn::initialize_range(p, seed, go, go + count, local.data() + lo);
  });
  local.set_requires_grad(true);
  *p.tensor = local;
}

AxisShards::AxisShards(const AxisGroup& group, nn::Module& model, const ShardsOf& shards_of) : group_(group) {
  for (const nn::Parameter& p : model.parameters()) global_shapes_[p.name] = p.tensor->shape();
  for (int r = 0; r < group_.size(); ++r) shards_.push_back(shards_of(r));
}

std::vector<std::pair<int64_t, int64_t>> AxisShards::norm_ranges(const std::string& name) const {
  const bool whole = !split(name);
  if (whole && group_.rank() != 0) return {};  // replicated: the first rank counts it
  int64_t n = 1;
  for (int64_t d : whole ? global_shapes_.at(name) : shard(name).local()) n *= d;
  return {{0, n}};
}

Tensor AxisShards::assemble(const std::string& param, std::span<const float> data) const {
  const Shape& shape = global_shapes_.at(param);
  Tensor global = Tensor::empty(shape);
  if (!split(param)) {
    std::copy(data.begin(), data.end(), global.data());
    return global;
  }
  // Every rank's shard has the same size, so one all_gather brings them all.
  const int64_t n = static_cast<int64_t>(data.size());
  Tensor parts = Tensor::empty({group_.size() * n});
  all_gather(group_, data, parts.span());
  for (int r = 0; r < group_.size(); ++r) {
    shards_[r].at(param).for_each_run([&](int64_t lo, int64_t go, int64_t count) {
      std::memcpy(global.data() + go, parts.data() + r * n + lo, count * sizeof(float));
    });
  }
  return global;
}

void AxisShards::cut(const std::string& param, std::span<const float> global, std::span<float> out) const {
  if (!split(param)) {
    std::copy(global.begin(), global.end(), out.begin());
    return;
  }
  shard(param).for_each_run([&](int64_t lo, int64_t go, int64_t count) {
    std::memcpy(out.data() + lo, global.data() + go, count * sizeof(float));
  });
}

void AxisShards::write(CheckpointSink* writer, const std::string& key, const std::string& param,
                       std::span<const float> data) const {
  if (!split(param)) {
    if (writer) writer->write(key, global_shapes_.at(param), data);
    return;
  }
  MemoryScope scope(MemoryCategory::Communication);
  const Tensor global = assemble(param, data);
  if (writer) writer->write(key, global.shape(), global.span());
}

void AxisShards::read(const CheckpointReader& reader, const std::string& key, const std::string& param,
                      std::span<float> out) const {
  const Shape& shape = global_shapes_.at(param);
  if (!split(param)) return reader.read(key, shape, out);
  MemoryScope scope(MemoryCategory::Communication);
  Tensor global = Tensor::empty(shape);
  reader.read(key, shape, global.span());
  cut(param, global.span(), out);
}

NestedShards::NestedShards(const AxisGroup& group, std::shared_ptr<const AxisShards> outer,
                           std::shared_ptr<const AxisShards> inner)
    : group_(group), outer_(std::move(outer)), inner_(std::move(inner)) {}

std::vector<std::pair<int64_t, int64_t>> NestedShards::norm_ranges(const std::string& name) const {
  // Where the inner axis leaves a parameter whole, its local elements are outer's; where it
  // splits one, it is whole on outer's ranks that count it at all.
  if (inner_->norm_ranges(name).empty()) return {};
  if (!inner_->split(name)) return outer_->norm_ranges(name);
  if (outer_->norm_ranges(name).empty()) return {};
  return inner_->norm_ranges(name);
}

void NestedShards::write(CheckpointSink* writer, const std::string& key, const std::string& param,
                         std::span<const float> data) const {
  MemoryScope scope(MemoryCategory::Communication);
  const Tensor middle = inner_->assemble(param, data);  // what the outer split left this rank
  const Tensor global = outer_->assemble(param, middle.span());
  if (writer) writer->write(key, global.shape(), global.span());
}

void NestedShards::read(const CheckpointReader& reader, const std::string& key, const std::string& param,
                        std::span<float> out) const {
  MemoryScope scope(MemoryCategory::Communication);
  const Shape& shape = outer_->global_shape(param);
  Tensor global = Tensor::empty(shape);
  reader.read(key, shape, global.span());
  Tensor middle = Tensor::empty(inner_->global_shape(param));
  outer_->cut(param, global.span(), middle.span());
  inner_->cut(param, middle.span(), out);
}

}  // namespace shardlab::parallel
