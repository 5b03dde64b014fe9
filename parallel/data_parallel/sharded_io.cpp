#include "parallel/data_parallel/sharded_io.h"

#include <algorithm>
#include <map>

#include "framework/error.h"
#include "framework/memory.h"
#include "parallel/comm/collectives.h"

namespace shardlab::parallel {

void ParamIO::write(CheckpointSink* writer, const std::string& key, const std::string& param, const Shape& shape,
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

void ParamIO::add_views(optim::ParamViews& out, const std::string& param, std::span<float> value,
                        std::span<float> grad, int64_t offset, bool decay) const {
  const auto add = [&](int64_t from, int64_t to, bool counted) {  // [from, to) of the parameter
    const size_t at = static_cast<size_t>(from - offset), n = static_cast<size_t>(to - from);
    out.push_back({.name = param, .offset = from, .value = value.subspan(at, n),
                   .grad = grad.empty() ? grad : grad.subspan(at, n), .decay = decay, .counted = counted});
  };
  const int64_t end = offset + static_cast<int64_t>(value.size());
  if (!shards_) return add(offset, end, true);
  int64_t at = offset;
  for (const auto& [lo, hi] : shards_->norm_ranges(param)) {
    const int64_t a = std::max(lo, offset), b = std::min(hi, end);
    if (a >= b) continue;
    if (at < a) add(at, a, false);
    add(a, b, true);
    at = b;
  }
  if (at < end) add(at, end, false);
}

void save_sharded(const AxisGroup& shard, const FlatLayout& layout, std::span<const float> slice,
                  const std::string& prefix, const ParamIO& io, bool writes, CheckpointSink* writer) {
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
  const int64_t lo = layout.slice_begin(shard_rank), hi = layout.slice_end(shard_rank);
  std::fill(slice.begin(), slice.end(), 0.0f);
  layout.for_each_overlap(lo, hi, [&](const FlatEntry& e, int64_t a, int64_t b) {
    io.read_range(reader, prefix + e.name, e.name, e.param.shape(), a - e.offset, slice.subspan(a - lo, b - a));
  });
}

namespace {

// Calls fn(state, position in flat) for every state tensor of kind `kind` whose view lies
// in `layout`'s elements [lo, lo + size).
template <typename Fn>
void for_each_state_in(const optim::Optimizer& optimizer, const std::string& kind, const FlatLayout& layout,
                       int64_t lo, int64_t size, Fn fn) {
  std::map<std::string, int64_t> offset_of;
  for (const FlatEntry& e : layout.entries()) offset_of.emplace(e.name, e.offset);
  for (const optim::Optimizer::State& s : optimizer.state()) {
    if (s.kind != kind) continue;
    const optim::ParamView& view = optimizer.layout()[s.view];
    const auto it = offset_of.find(view.name);
    if (it == offset_of.end()) continue;
    const int64_t at = it->second + view.offset - lo;
    SL_ASSERT(at >= 0 && at + s.tensor.numel() <= size, "optimizer state of " + view.name + " lies outside the flat range");
    fn(s.tensor, at);
  }
}

}  // namespace

void pack_state(const optim::Optimizer& optimizer, const std::string& kind, const FlatLayout& layout, int64_t lo,
                std::span<float> flat) {
  std::fill(flat.begin(), flat.end(), 0.0f);
  for_each_state_in(optimizer, kind, layout, lo, static_cast<int64_t>(flat.size()), [&](const Tensor& t, int64_t at) {
    std::copy_n(t.data(), t.numel(), flat.begin() + at);
  });
}

void unpack_state(const optim::Optimizer& optimizer, const std::string& kind, const FlatLayout& layout, int64_t lo,
                  std::span<const float> flat) {
  for_each_state_in(optimizer, kind, layout, lo, static_cast<int64_t>(flat.size()), [&](const Tensor& t, int64_t at) {
    Tensor state = t;
    std::copy_n(flat.begin() + at, t.numel(), state.data());
  });
}

void save_sharded_state(const AxisGroup& shard, const FlatLayout& layout, const optim::Optimizer& optimizer,
                        const ParamIO& io, bool writes, CheckpointSink* writer) {
  MemoryScope scope(MemoryCategory::Communication);
  Tensor slice = Tensor::empty({layout.shard_size()});
  for (const std::string& kind : optimizer.state_kinds()) {
    pack_state(optimizer, kind, layout, layout.slice_begin(shard.rank()), slice.span());
    save_sharded(shard, layout, slice.span(), "optim/" + kind + "/", io, writes, writer);
  }
}

void load_sharded_state(const CheckpointReader& reader, const FlatLayout& layout, int shard_rank, const ParamIO& io,
                        const optim::Optimizer& optimizer) {
  MemoryScope scope(MemoryCategory::Communication);
  Tensor slice = Tensor::empty({layout.shard_size()});
  for (const std::string& kind : optimizer.state_kinds()) {
    load_sharded(reader, layout, shard_rank, "optim/" + kind + "/", io, slice.span());
    unpack_state(optimizer, kind, layout, layout.slice_begin(shard_rank), slice.span());
  }
}

}  // namespace shardlab::parallel
