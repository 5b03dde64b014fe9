// The run's precision policy: --precision and --reduce-dtype as the user asked, and the
// bf16 matmul path (--bf16-matmul auto|native|rounded) this machine should take, agreed
// by every rank of the mesh (native only if it is the choice on every rank) so that all
// ranks multiply the same way. train_gpt and generate choose it so.
#pragma once

#include <mpi.h>

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
// The same for a validated training run; a precision resolve_precision chose keeps its
// measured path and says why (PrecisionPolicy::dtype_reason).
PrecisionPolicy choose_precision(const RunConfig& run, const parallel::Mesh& mesh);

// --precision auto, train_gpt's default: bf16 where the bf16 matmul path `auto` picks is
// oneDNN's bf16 kernels on every rank of `world` (the CPU has avx512_bf16 or AMX and its bf16
// GEMM measures at least 10% faster than fp32, select_bf16_matmul), fp32 elsewhere -- on a
// CPU that would run bf16 on its fp32 units, bf16 only costs conversions. The environment
// variable SHARDLAB_DEFAULT_PRECISION (fp32 or bf16) decides instead, without measuring (the
// test suite pins fp32 so that its comparisons keep fp32's tolerances on every machine).
// Returns `run` with precision fp32 or bf16 -- bf16 with bf16_matmul native, the path
// measured -- and precision_reason saying why, validated again. Collective over `world`
// when run.precision is auto (every rank reaches it: the flags are the same); `run`
// unchanged otherwise.
RunConfig resolve_precision(RunConfig run, MPI_Comm world);

}  // namespace shardlab::runtime
