// Roofline of one operation (book chapter "roofline"): FLOPs against bytes moved.
//
//   T_math  = FLOPs / peak FLOP/s          T_comms = bytes / bandwidth
//   lower bound = max(T_math, T_comms)  (perfect overlap), upper bound = T_math + T_comms
//   intensity = FLOPs / bytes; the op is compute-bound iff intensity > peak / bandwidth
//   (the chip's critical intensity, e.g. 1.97e14 / 8.1e11 = 243 FLOPs/byte on TPU v5e).
//
// Matmul shapes: X[B,D] . W[D,F] -> Y[B,F] (B batch of tokens, D contracting, F output);
// activations (X, Y) and weights (W) may have different dtypes; the math runs in the wider.
//
//   MatmulSpec m{.b = 512, .d = 8192, .f = 32768, .x = DType::kBf16, .w = DType::kInt8};
//   Roofline r = matmul_roofline(m, hardware("tpu-v5e"));   // r.compute_bound, r.lower_bound
#pragma once

#include <cstdint>
#include <string>

#include "parallel/cost/hardware/hardware.h"

namespace shardlab::cost {

// int4 is a storage type (weights, KV cache: half a byte per element, the book's serving
// tables); the book gives no int4 peak, so an int4 x int4 matmul has none (peak_flops throws)
// and int4 weights multiply in the activations' dtype.
enum class DType { kFp32, kBf16, kFp8, kInt8, kInt4 };

DType parse_dtype(const std::string& name);  // fp32|f32, bf16, fp8, int8, int4; throws UserError
std::string to_string(DType dtype);
double bytes_of(DType dtype);
// The wider of two operand dtypes: the one the matmul units must run in.
DType compute_dtype(DType a, DType b);
// Peak FLOP/s of `hw` in `dtype`; throws UserError where the chip has none (fp8 on A100).
double peak_flops(const HardwareProfile& hw, DType dtype);
// FLOPs per byte of HBM traffic above which an op in `dtype` is compute-bound.
double critical_intensity(const HardwareProfile& hw, DType dtype);

struct Roofline {
  double flops = 0;
  double bytes = 0;               // memory (or network) bytes moved
  double intensity = 0;           // flops / bytes
  double critical_intensity = 0;  // peak_flops / bandwidth
  double t_math = 0;              // seconds
  double t_comms = 0;             // seconds
  double lower_bound = 0;         // max(t_math, t_comms)
  double upper_bound = 0;         // t_math + t_comms
  bool compute_bound = false;     // t_math >= t_comms
  double achieved_flops = 0;      // flops / lower_bound: the FLOP/s a roofline plot shows
                                  // (min(peak, intensity x bandwidth))
};

Roofline roofline(double flops, double bytes, double peak_flops, double bandwidth);

struct MatmulSpec {
  int64_t b = 0, d = 0, f = 0;
  DType x = DType::kBf16;    // input activations
  DType w = DType::kBf16;    // weights
  DType out = DType::kBf16;  // output activations (written back)
};

// 2BDF FLOPs against loading X and W and writing Y from/to HBM.
Roofline matmul_roofline(const MatmulSpec& m, const HardwareProfile& hw);
// The batch B above which the matmul is compute-bound, solving intensity(B) = critical
// exactly for the given D and F (-> critical * bytes(W) / 2 when B << D, F). Infinite when
// no batch makes it compute-bound.
double matmul_critical_batch(const MatmulSpec& m, const HardwareProfile& hw);
// The book's large-D/F approximation of that batch: with B << D, F the bytes are the
// weights' D F w, the intensity 2 B / w, so B > critical intensity x w / 2 (240 in bf16 on
// v5e, 120 with int8 weights, 243 for int8 x int8).
double matmul_critical_batch_approx(const MatmulSpec& m, const HardwareProfile& hw);

// The matmul the MXU actually runs when D and F are padded up to multiples of `tile` (the
// systolic array's edge: 128, 256 on v6e; book "tpus": weights are padded to fill it).
// useful_fraction = D F / (D' F'): the share of its FLOPs that are not padding.
struct PaddedMatmul {
  MatmulSpec padded;
  double useful_fraction = 1;
  double padded_elements = 0;  // zeros added to W: D'F' - DF (each costs 2B wasted FLOPs)
};
// UserError unless tile >= 1.
PaddedMatmul pad_to_tile(const MatmulSpec& m, int64_t tile);

// Network roofline (book: "a 2-chip matmul"): W sharded on the contracting dim D over
// `shards` chips of one axis; each chip multiplies its slice, then the [B,F] partial sums
// are all-reduced over the axis (see network/collective.h). t_comms is that all-reduce.
struct ShardedMatmul {
  Roofline roofline;
  double critical_d = 0;  // D above which t_math >= t_comms (independent of B)
};
ShardedMatmul contraction_sharded_matmul(const MatmulSpec& m, int shards, const HardwareProfile& hw);

}  // namespace shardlab::cost
