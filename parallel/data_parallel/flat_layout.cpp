#include "parallel/data_parallel/flat_layout.h"

#include <algorithm>
#include <cstring>

#include "framework/error.h"
#include "framework/memory.h"

namespace shardlab::parallel {

FlatLayout::FlatLayout(const std::vector<Param>& params, int shards) : shards_(shards) {
  SL_ASSERT(shards >= 1, "FlatLayout needs at least one shard");
  for (const Param& p : params) {
    entries_.push_back({p.name, p.tensor, numel_, p.tensor.numel(), p.decay});
    numel_ += p.tensor.numel();
  }
  // Whole pairs per shard: a shard gathered in bf16 travels as floats (collectives.h).
  padded_ = (numel_ + 2 * shards - 1) / (2 * shards) * (2 * shards);
}

void FlatLayout::pack_params(std::span<float> flat) const {
  SL_ASSERT(static_cast<int64_t>(flat.size()) == padded_, "pack_params: wrong buffer size");
  for (const FlatEntry& e : entries_) std::memcpy(flat.data() + e.offset, e.param.data(), e.numel * sizeof(float));
  std::fill(flat.begin() + numel_, flat.end(), 0.0f);
}

void FlatLayout::pack_grads(std::span<float> flat) const {
  SL_ASSERT(static_cast<int64_t>(flat.size()) == padded_, "pack_grads: wrong buffer size");
  for (const FlatEntry& e : entries_) {
    const Tensor g = e.param.grad();
    if (g.defined()) std::memcpy(flat.data() + e.offset, g.data(), e.numel * sizeof(float));
    else std::fill_n(flat.data() + e.offset, e.numel, 0.0f);
  }
  std::fill(flat.begin() + numel_, flat.end(), 0.0f);
}

void FlatLayout::unpack_params(std::span<const float> flat) const {
  SL_ASSERT(static_cast<int64_t>(flat.size()) == padded_, "unpack_params: wrong buffer size");
  for (const FlatEntry& e : entries_) {
    Tensor p = e.param;
    std::memcpy(p.data(), flat.data() + e.offset, e.numel * sizeof(float));
  }
}

void FlatLayout::unpack_grads(std::span<const float> flat, float scale) const {
  SL_ASSERT(static_cast<int64_t>(flat.size()) == padded_, "unpack_grads: wrong buffer size");
  for (const FlatEntry& e : entries_) {
    Tensor p = e.param;
    if (!p.grad().defined()) {
      MemoryScope scope(MemoryCategory::Gradients);
      p.set_grad(Tensor::empty(p.shape()));
    }
    float* g = p.grad().data();
    const float* src = flat.data() + e.offset;
    for (int64_t i = 0; i < e.numel; ++i) g[i] = scale * src[i];
  }
}

}  // namespace shardlab::parallel
