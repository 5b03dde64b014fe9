// FlatLayout: a group of parameters laid end to end in one flat float buffer, padded to
// a multiple of twice the shard count (every shard an even count, for bf16 gathers), so that one collective moves the whole group and rank r
// of S owns the contiguous slice [r * P / S, (r + 1) * P / S) of the P padded elements.
//
// It is the unit of every data-parallel strategy: a DP / ZeRO-1/2 gradient bucket, or an
// FSDP unit (one block's parameters). Parameter i occupies [offset_i, offset_i + numel_i).
//
//   FlatLayout layout(params, /*shards=*/4);
//   std::vector<float> flat(layout.padded());
//   layout.pack_grads(flat);                        // grads into their places, zero padding
//   auto [lo, hi] = layout.slice(rank);             // what this rank owns
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace shardlab::parallel {

struct FlatEntry {
  std::string name;
  Tensor param;
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;
  bool decay = true;   // takes weight decay
};

class FlatLayout {
 public:
  struct Param {
    std::string name;
    Tensor tensor;
    bool decay;
  };
  FlatLayout(const std::vector<Param>& params, int shards);

  const std::vector<FlatEntry>& entries() const { return entries_; }
  int64_t numel() const { return numel_; }      // real elements
  int64_t padded() const { return padded_; }    // multiple of 2 shards()
  int shards() const { return shards_; }
  int64_t shard_size() const { return padded_ / shards_; }
  std::pair<int64_t, int64_t> slice(int rank) const { return {slice_begin(rank), slice_end(rank)}; }
  int64_t slice_begin(int rank) const { return rank * shard_size(); }
  int64_t slice_end(int rank) const { return (rank + 1) * shard_size(); }

  // Copies between parameters (or their gradients) and a flat buffer of padded() floats.
  // Gradients that are undefined read as zero; padding is written as zero.
  void pack_params(std::span<float> flat) const;
  void pack_grads(std::span<float> flat) const;
  void unpack_params(std::span<const float> flat) const;
  void unpack_grads(std::span<const float> flat, float scale) const;  // grad = scale * flat

  // Calls fn(entry, lo, hi) for every parameter overlapping flat range [begin, end), with
  // lo/hi the overlap in flat coordinates.
  template <typename Fn>
  void for_each_overlap(int64_t begin, int64_t end, Fn fn) const {
    for (const FlatEntry& e : entries_) {
      const int64_t lo = std::max(begin, e.offset), hi = std::min(end, e.offset + e.numel);
      if (lo < hi) fn(e, lo, hi);
    }
  }

 private:
  std::vector<FlatEntry> entries_;
  int64_t numel_ = 0;
  int64_t padded_ = 0;
  int shards_ = 1;
};

}  // namespace shardlab::parallel
