#include "parallel/runtime/precision_choice.h"

#include "framework/error.h"
#include "parallel/comm/collectives.h"

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
  return choose_precision(run.parallel().precision, run.bf16_matmul, mesh);  // the dtypes of the flags
}

}  // namespace shardlab::runtime
