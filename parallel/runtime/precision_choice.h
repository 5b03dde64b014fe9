// The run's precision policy: --precision and --reduce-dtype as the user asked, and the
// bf16 matmul path (--bf16-matmul auto|native|rounded) this machine should take, agreed
// by every rank of the mesh (native only if it is the choice on every rank) so that all
// ranks multiply the same way. train_gpt and generate choose it so.
#pragma once

#include <string>

#include "framework/precision.h"
#include "parallel/comm/mesh.h"
#include "parallel/runtime/run_config.h"

namespace shardlab::runtime {

// UserError unless `bf16_matmul` is auto, native or rounded, and auto when `compute` is
// fp32 (`precision` is the --precision value, for the message). Pure: every rank throws
// alike before the first collective.
void check_bf16_matmul_flag(DType compute, const std::string& precision, const std::string& bf16_matmul);

// Collective over the whole mesh when `compute` is bf16 (each rank measures its CPU).
// `workload`: what `auto` measures (training's GEMMs, or decoding's weight streaming).
// `asked`: the dtypes (compute and the wires); the result adds the bf16 matmul path.
PrecisionPolicy choose_precision(const PrecisionPolicy& asked, const std::string& bf16_matmul,
                                 const parallel::Mesh& mesh, Bf16Workload workload = Bf16Workload::kTraining);
// The same for a validated training run.
PrecisionPolicy choose_precision(const RunConfig& run, const parallel::Mesh& mesh);

}  // namespace shardlab::runtime
