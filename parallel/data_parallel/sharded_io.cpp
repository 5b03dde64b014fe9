#include "parallel/data_parallel/sharded_io.h"

#include <algorithm>

#include "framework/memory.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"

namespace shardlab::parallel {

void save_sharded(const AxisGroup& shard, const FlatLayout& layout, std::span<const float> slice,
                  const std::string& prefix, CheckpointWriter* writer) {
  MemoryScope scope(MemoryCategory::Communication);
  Tensor full = Tensor::empty({layout.padded()});
  all_gather(shard, slice, full.span());
  if (!writer) return;
  for (const FlatEntry& e : layout.entries()) {
    writer->write(prefix + e.name, e.param.shape(), full.span().subspan(e.offset, e.numel));
  }
}

void load_sharded(const CheckpointReader& reader, const FlatLayout& layout, int shard_rank, const std::string& prefix,
                  std::span<float> slice) {
  const auto [lo, hi] = layout.slice(shard_rank);
  std::fill(slice.begin(), slice.end(), 0.0f);
  layout.for_each_overlap(lo, hi, [&](const FlatEntry& e, int64_t a, int64_t b) {
    reader.read_range(prefix + e.name, e.param.shape(), a - e.offset, slice.subspan(a - lo, b - a));
  });
}

}  // namespace shardlab::parallel
