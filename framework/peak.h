// Measured peak FLOP/s of this CPU: the denominators of every MFU shardlab prints.
//
// Each runs independent chains of multiply-adds in the widest vector registers, on
// `threads` OpenMP threads at once, for about `seconds`, and returns the FLOP/s achieved:
// - measure_peak_flops: fp32 fused multiply-adds in the widest registers the compiler
//   targets (AVX-512 here), 2 FLOPs per lane per FMA;
// - measure_peak_bf16_flops: avx512_bf16's dot products (vdpbf16ps: per fp32 lane, two
//   bf16 products added to an fp32 accumulator, 4 FLOPs), the bf16 matmul's peak. It
//   returns 0 on a CPU without avx512_bf16, where no bf16 instruction runs faster than fp32.
//
//   const double fp32 = measure_peak_flops(2), bf16 = measure_peak_bf16_flops(2);
//   const double mfu = achieved_flops / mfu_denominator(policy.compute == DType::kBF16, fp32, bf16);
#pragma once

namespace shardlab {

double measure_peak_flops(int threads, double seconds = 0.2);
double measure_peak_bf16_flops(int threads, double seconds = 0.2);

// The peak an MFU of a run in `bf16` compute divides by: the bf16 peak where this CPU has
// one (measured above, nonzero), the fp32 peak otherwise (bf16 then runs on fp32 units).
double mfu_denominator(bool bf16, double fp32_peak, double bf16_peak);

}  // namespace shardlab
