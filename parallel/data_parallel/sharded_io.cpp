#include "parallel/data_parallel/sharded_io.h"

#include <algorithm>

#include "framework/memory.h"
#include "parallel/comm/collectives.h"

namespace shardlab::parallel {

void ParamIO::write(CheckpointWriter* writer, const std::string& key, const std::string& param, const Shape& shape,
                    std::span<const float> data) const {
  if (shards_) return shards_->write(writer, key, param, data);
  if (writer) writer->write(key, shape, data);
}

void ParamIO::read(const CheckpointReader& reader, const std::string& key, const std::string& param,
                   const Shape& shape, std::span<float> out) const {
  if (shards_) return shards_->read(reader, key, param, out);
  reader.read(key, shape, out);
}

void ParamIO::read_range(const CheckpointReader& reader, const std::string& key, const std::string& param,
                         const Shape& shape, int64_t offset, std::span<float> out) const {
  if (!shards_) return reader.read_range(key, shape, offset, out);
  MemoryScope scope(MemoryCategory::Communication);
  Tensor local = Tensor::empty(shape);
  shards_->read(reader, key, param, local.span());
  std::copy_n(local.data() + offset, out.size(), out.begin());
}

void ParamIO::add_grad_spans(std::vector<optim::GradSpan>& out, const std::string& param, std::span<float> grad,
                             int64_t offset) const {
  if (!shards_) return out.push_back({grad, true});
  // grad's elements in the order of the parameter, marked counted inside norm_ranges.
  const int64_t end = offset + static_cast<int64_t>(grad.size());
  int64_t at = offset;
  for (const auto& [lo, hi] : shards_->norm_ranges(param)) {
    const int64_t a = std::max(lo, offset), b = std::min(hi, end);
    if (a >= b) continue;
    if (at < a) out.push_back({grad.subspan(at - offset, a - at), false});
    out.push_back({grad.subspan(a - offset, b - a), true});
    at = b;
  }
  if (at < end) out.push_back({grad.subspan(at - offset, end - at), false});
}

double ParamIO::reduce_norm(double local, const AxisGroup* data_shard) const {
  float sum = static_cast<float>(local);
  if (data_shard) all_reduce(*data_shard, {&sum, 1});
  if (shards_) all_reduce(shards_->group(), {&sum, 1});
  return sum;
}

void save_sharded(const AxisGroup& shard, const FlatLayout& layout, std::span<const float> slice,
                  const std::string& prefix, const ParamIO& io, bool writes, CheckpointWriter* writer) {
  MemoryScope scope(MemoryCategory::Communication);
  Tensor full = Tensor::empty({layout.padded()});
  all_gather(shard, slice, full.span());
  if (!writes) return;
  for (const FlatEntry& e : layout.entries()) {
    io.write(writer, prefix + e.name, e.name, e.param.shape(), full.span().subspan(e.offset, e.numel));
  }
}

void load_sharded(const CheckpointReader& reader, const FlatLayout& layout, int shard_rank, const std::string& prefix,
                  const ParamIO& io, std::span<float> slice) {
  const auto [lo, hi] = layout.slice(shard_rank);
  std::fill(slice.begin(), slice.end(), 0.0f);
  layout.for_each_overlap(lo, hi, [&](const FlatEntry& e, int64_t a, int64_t b) {
    io.read_range(reader, prefix + e.name, e.name, e.param.shape(), a - e.offset, slice.subspan(a - lo, b - a));
  });
}

}  // namespace shardlab::parallel
