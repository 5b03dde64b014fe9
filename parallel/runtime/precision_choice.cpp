#include "parallel/runtime/precision_choice.h"

#include <mpi.h>

#include "framework/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm.h"

namespace shardlab::runtime {

void check_bf16_matmul_flag(DType compute, const std::string& precision, const std::string& bf16_matmul) {
  if (bf16_matmul != "auto" && bf16_matmul != "native" && bf16_matmul != "rounded") {
    throw UserError("--bf16-matmul '" + bf16_matmul + "' must be auto, native or rounded");
  }
  if (compute != DType::kBF16 && bf16_matmul != "auto") {
    throw UserError("--bf16-matmul " + bf16_matmul + " applies to --precision bf16, and this run is " + precision);
  }
}

PrecisionPolicy choose_precision(const PrecisionPolicy& asked, const std::string& bf16_matmul,
                                 const parallel::Mesh& mesh, Bf16Workload workload) {
  PrecisionPolicy policy = asked;
  if (policy.compute != DType::kBF16) return policy;
  const Bf16MatmulChoice mine = select_bf16_matmul(bf16_matmul, workload);
  float rounded = mine.path == Bf16Matmul::kRounded ? 1.0f : 0.0f;
  parallel::all_reduce(mesh.all(), {&rounded, 1}, parallel::ReduceOp::kMax);
  policy.matmul = rounded > 0 ? Bf16Matmul::kRounded : Bf16Matmul::kNative;
  policy.matmul_reason = policy.matmul == mine.path ? mine.reason
                                                    : "fp32 kernels on bf16-rounded operands: another rank's CPU runs bf16 "
                                                      "matmuls no faster than fp32 (this rank: " + mine.reason + ")";
  return policy;
}

PrecisionPolicy choose_precision(const RunConfig& run, const parallel::Mesh& mesh) {
  PrecisionPolicy policy = run.parallel().precision;  // the dtypes of the flags
  if (!run.precision_reason.empty() && policy.compute == DType::kBF16 && run.bf16_matmul == "native") {
    policy.matmul = Bf16Matmul::kNative;  // resolve_precision measured it, on every rank
    policy.matmul_reason = run.precision_reason;
  } else {
    policy = choose_precision(policy, run.bf16_matmul, mesh);
  }
  policy.dtype_reason = run.precision_reason;
  return policy;
}

RunConfig resolve_precision(RunConfig run, MPI_Comm world) {
  if (run.precision != "auto") return run;
  // Each rank votes; the least vote wins, so all ranks agree whatever their environment:
  // 0 fp32, 1 bf16 with its matmul path still to measure (choose_precision), 2 bf16 on the
  // bf16 kernels, measured faster here.
  // A rank whose SHARDLAB_DEFAULT_PRECISION is not a dtype votes kRefused, so every rank
  // stops with the error rather than wait for it in the vote.
  enum Vote { kRefused = -1, kFp32 = 0, kBf16 = 1, kBf16Native = 2 };
  int vote = kRefused;
  std::string why;
  try {
    const DefaultPrecision mine = default_precision();
    vote = mine.compute == DType::kF32 ? kFp32 : mine.measured_native ? kBf16Native : kBf16;
    why = mine.reason;
  } catch (const UserError& e) {
    why = e.what();
  }
  int agreed = vote;
  SL_MPI(MPI_Allreduce(&vote, &agreed, 1, MPI_INT, MPI_MIN, world));
  if (agreed == kRefused) {
    throw UserError(vote == kRefused ? why
                                     : "another rank's SHARDLAB_DEFAULT_PRECISION is not fp32 or bf16; set it alike "
                                       "on every rank, or give --precision");
  }
  run.precision = agreed == kFp32 ? "fp32" : "bf16";
  if (agreed == kBf16Native) run.bf16_matmul = "native";
  run.precision_reason = agreed == vote ? why
                                        : std::string(agreed == kFp32 ? "fp32" : "bf16") +
                                              " by default (--precision auto): another rank's CPU runs bf16 matmuls no "
                                              "faster than fp32, or its SHARDLAB_DEFAULT_PRECISION says so (this rank: " +
                                              why + ")";
  run.validate();
  return run;
}

}  // namespace shardlab::runtime
