// Shared tuning for optim's element-wise loops (internal to optim/).
#pragma once

#include <cstdint>

namespace shardlab::optim {

// Below this many elements an OpenMP team costs more than the loop it would split.
constexpr int64_t kParallelElements = 1 << 15;

}  // namespace shardlab::optim
