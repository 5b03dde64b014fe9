// Helpers shared by the data-parallel MPI tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framework/nn/transformer.h"
#include "tests/mpi_test_util.h"

namespace shardlab::testing {

// The data-parallel meshes of this job: all ranks on `data`, and at 4 ranks also hybrid
// sharding (2 replicas of 2 shards).
inline std::vector<std::string> data_parallel_meshes() {
  const int n = world_size();
  std::vector<std::string> m{"data=" + std::to_string(n)};
  if (n == 4) m.push_back("data=2,fsdp=2");
  return m;
}

// gpt-tiny built as train_gpt builds its model: parameters without storage until a
// layout allocates them (nn::DeferParameters).
inline std::unique_ptr<nn::Transformer> deferred_tiny(nn::Remat remat = nn::Remat::None) {
  nn::ModelConfig c = nn::ModelConfig::preset("gpt-tiny");
  c.remat = remat;
  return nn::deferred_transformer(c);
}

}  // namespace shardlab::testing
