#include "parallel/runtime/precision_choice.h"

#include "parallel/comm/collectives.h"

namespace shardlab::runtime {

PrecisionPolicy choose_precision(const RunConfig& run, const parallel::Mesh& mesh) {
  PrecisionPolicy policy;
  policy.compute = parse_dtype(run.precision, "--precision");
  policy.reduce = parse_dtype(run.reduce_dtype, "--reduce-dtype");
  if (policy.compute != DType::kBF16) return policy;
  const Bf16MatmulChoice mine = select_bf16_matmul(run.bf16_matmul);
  float rounded = mine.path == Bf16Matmul::kRounded ? 1.0f : 0.0f;
  parallel::all_reduce(mesh.all(), {&rounded, 1}, parallel::ReduceOp::kMax);
  policy.matmul = rounded > 0 ? Bf16Matmul::kRounded : Bf16Matmul::kNative;
  policy.matmul_reason = policy.matmul == mine.path ? mine.reason
                                                    : "fp32 kernels on bf16-rounded operands: another rank's CPU runs bf16 "
                                                      "GEMMs no faster than fp32 (this rank: " + mine.reason + ")";
  return policy;
}

}  // namespace shardlab::runtime
