// The run's precision policy: --precision and --reduce-dtype as the user asked, and the
// bf16 matmul path (--bf16-matmul auto|native|rounded) this machine should take, agreed
// by every rank of the mesh (native only if it is the choice on every rank) so that all
// ranks multiply the same way.
#pragma once

#include "framework/precision.h"
#include "parallel/comm/mesh.h"
#include "parallel/runtime/run_config.h"

namespace shardlab::runtime {

// Collective over the whole mesh when --precision is bf16 (each rank measures its CPU).
PrecisionPolicy choose_precision(const RunConfig& run, const parallel::Mesh& mesh);

}  // namespace shardlab::runtime
