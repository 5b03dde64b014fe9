// ShardedAdamW: AdamW whose moments exist only for this rank's slice of each flat group
// (ZeRO-1/2/3). The update is the same element-wise kernel as optim::AdamW, so a sharded
// step changes every element exactly as the single-process step would, given the same
// gradient; weight decay follows each parameter's flag inside the slice.
//
//   ShardedAdamW opt({&bucket0, &bucket1}, shard_rank, {.weight_decay = 0.1f});
//   opt.begin_step();
//   opt.update(0, param_slice, grad_slice, lr);   // slice [lo, hi) of bucket 0
#pragma once

#include <span>
#include <vector>

#include "optim/adamw.h"
#include "parallel/data_parallel/flat_layout.h"

namespace shardlab::parallel {

class ShardedAdamW {
 public:
  ShardedAdamW(std::vector<const FlatLayout*> groups, int shard_rank, optim::AdamWOptions options);

  void begin_step() { ++step_; }
  // param_slice and grad_slice hold flat elements [lo, hi) of group g (this rank's slice).
  void update(size_t group, std::span<float> param_slice, std::span<const float> grad_slice, float lr);

  int64_t step_count() const { return step_; }
  void set_step_count(int64_t step) { step_ = step; }
  // This rank's slice of the first / second moment of group g (checkpoint I/O writes into them).
  Tensor& m(size_t group) { return m_[group]; }
  Tensor& v(size_t group) { return v_[group]; }

 private:
  std::vector<const FlatLayout*> groups_;
  int shard_rank_;
  optim::AdamWOptions options_;
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
};

}  // namespace shardlab::parallel
