// Measured peak FLOP/s of this CPU: the denominator of every MFU shardlab prints.
//
// Runs independent chains of fused multiply-adds in the widest vector registers the
// compiler targets (AVX-512 here), on `threads` OpenMP threads at once, for about
// `seconds`, and returns the FLOP/s achieved (2 FLOPs per lane per FMA).
#pragma once

namespace shardlab {

double measure_peak_flops(int threads, double seconds = 0.2);

}  // namespace shardlab
