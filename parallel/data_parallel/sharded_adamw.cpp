#include "parallel/data_parallel/sharded_adamw.h"

#include "framework/error.h"
#include "framework/memory.h"

namespace shardlab::parallel {

ShardedAdamW::ShardedAdamW(std::vector<const FlatLayout*> groups, int shard_rank, optim::AdamWOptions options)
    : groups_(std::move(groups)), shard_rank_(shard_rank), options_(std::move(options)) {
  MemoryScope scope(MemoryCategory::Optimizer);
  for (const FlatLayout* g : groups_) {
    m_.push_back(Tensor::zeros({g->shard_size()}));
    v_.push_back(Tensor::zeros({g->shard_size()}));
  }
}

void ShardedAdamW::update(size_t group, std::span<float> param_slice, std::span<const float> grad_slice,
                          float lr) {
  const FlatLayout& g = *groups_[group];
  const auto [lo, hi] = g.slice(shard_rank_);
  SL_ASSERT(static_cast<int64_t>(param_slice.size()) == hi - lo && grad_slice.size() == param_slice.size(),
            "ShardedAdamW::update: slice sizes");
  float* m = m_[group].data();
  float* v = v_[group].data();
  // One kernel call per parameter piece: the decay flag is per parameter.
  g.for_each_overlap(lo, hi, [&](const FlatEntry& e, int64_t a, int64_t b) {
    const auto c = optim::adamw_coefficients(options_, lr, step_, e.decay);
    const size_t at = static_cast<size_t>(a - lo), n = static_cast<size_t>(b - a);
    optim::adamw_update(param_slice.subspan(at, n), grad_slice.subspan(at, n), {m + at, n}, {v + at, n}, c);
  });
}

}  // namespace shardlab::parallel
