#include "parallel/cost/roofline/roofline.h"

#include <algorithm>
#include <limits>

#include "framework/error.h"
#include "parallel/cost/network/collective.h"

namespace shardlab::cost {

DType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "f32" || name == "float32") return DType::kFp32;
  if (name == "bf16" || name == "bfloat16") return DType::kBf16;
  if (name == "fp8" || name == "f8") return DType::kFp8;
  if (name == "int8" || name == "i8") return DType::kInt8;
  if (name == "int4" || name == "i4") return DType::kInt4;
  throw UserError("unknown dtype '" + name + "'; use one of fp32, bf16, fp8, int8, int4");
}

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return "fp32";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
  }
  return "?";
}

double bytes_of(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return 4;
    case DType::kBf16: return 2;
    case DType::kFp8:
    case DType::kInt8: return 1;
    case DType::kInt4: return 0.5;
  }
  return 0;
}

DType compute_dtype(DType a, DType b) {
  if (bytes_of(a) != bytes_of(b)) return bytes_of(a) > bytes_of(b) ? a : b;
  return a == DType::kFp8 || b == DType::kFp8 ? DType::kFp8 : a;  // int8 x fp8 runs in fp8
}

double peak_flops(const HardwareProfile& hw, DType dtype) {
  double peak = 0;
  switch (dtype) {
    case DType::kFp32: peak = hw.flops_fp32; break;
    case DType::kBf16: peak = hw.flops_bf16; break;
    case DType::kFp8: peak = hw.flops_fp8; break;
    case DType::kInt8: peak = hw.flops_int8; break;
    case DType::kInt4: break;  // the book gives no int4 peak: int4 weights meet wider activations
  }
  if (peak <= 0) throw UserError(hw.name + " has no " + to_string(dtype) + " matmul units; choose another dtype");
  return peak;
}

double critical_intensity(const HardwareProfile& hw, DType dtype) {
  return peak_flops(hw, dtype) / hw.hbm_bandwidth;
}

Roofline roofline(double flops, double bytes, double peak, double bandwidth) {
  Roofline r;
  r.flops = flops;
  r.bytes = bytes;
  r.intensity = bytes > 0 ? flops / bytes : std::numeric_limits<double>::infinity();
  r.critical_intensity = peak / bandwidth;
  r.t_math = flops / peak;
  r.t_comms = bytes / bandwidth;
  r.lower_bound = std::max(r.t_math, r.t_comms);
  r.upper_bound = r.t_math + r.t_comms;
  r.compute_bound = r.t_math >= r.t_comms;
  r.achieved_flops = r.lower_bound > 0 ? flops / r.lower_bound : 0;
  return r;
}

namespace {

void check_shape(const MatmulSpec& m) {
  if (m.b <= 0 || m.d <= 0 || m.f <= 0)
    throw UserError("matmul sizes must be positive, got B=" + std::to_string(m.b) + " D=" +
                    std::to_string(m.d) + " F=" + std::to_string(m.f));
}

}  // namespace

Roofline matmul_roofline(const MatmulSpec& m, const HardwareProfile& hw) {
  check_shape(m);
  const double b = m.b, d = m.d, f = m.f;
  const double bytes = b * d * bytes_of(m.x) + d * f * bytes_of(m.w) + b * f * bytes_of(m.out);
  return roofline(2 * b * d * f, bytes, peak_flops(hw, compute_dtype(m.x, m.w)), hw.hbm_bandwidth);
}

// 2BDF = c (BDx + DFw + BFo)  =>  B = c DFw / (2DF - c (Dx + Fo)).
double matmul_critical_batch(const MatmulSpec& m, const HardwareProfile& hw) {
  check_shape(m);
  const double c = critical_intensity(hw, compute_dtype(m.x, m.w));
  const double d = m.d, f = m.f;
  const double denominator = 2 * d * f - c * (d * bytes_of(m.x) + f * bytes_of(m.out));
  if (denominator <= 0) return std::numeric_limits<double>::infinity();
  return c * d * f * bytes_of(m.w) / denominator;
}

double matmul_critical_batch_approx(const MatmulSpec& m, const HardwareProfile& hw) {
  return critical_intensity(hw, compute_dtype(m.x, m.w)) * bytes_of(m.w) / 2;
}

PaddedMatmul pad_to_tile(const MatmulSpec& m, int64_t tile) {
  check_shape(m);
  if (tile < 1) throw UserError("tile " + std::to_string(tile) + " must be at least 1 (the MXU edge, e.g. 128)");
  const auto up = [tile](int64_t n) { return (n + tile - 1) / tile * tile; };
  PaddedMatmul p{m, 1};
  p.padded.d = up(m.d), p.padded.f = up(m.f);
  p.useful_fraction = static_cast<double>(m.d) * m.f / (static_cast<double>(p.padded.d) * p.padded.f);
  p.padded_elements = static_cast<double>(p.padded.d) * p.padded.f - static_cast<double>(m.d) * m.f;
  return p;
}

ShardedMatmul contraction_sharded_matmul(const MatmulSpec& m, int shards, const HardwareProfile& hw) {
  check_shape(m);
  if (shards < 1 || m.d % shards != 0)
    throw UserError("cannot shard D=" + std::to_string(m.d) + " over " + std::to_string(shards) +
                    " chips; choose a shard count that divides D");
  const double peak = peak_flops(hw, compute_dtype(m.x, m.w));
  const double flops = 2.0 * m.b * m.d * m.f / shards;
  const double partial_bytes = static_cast<double>(m.b) * m.f * bytes_of(m.out);
  const double t_comms = collective_cost(CollectiveOp::kAllReduce, partial_bytes, {shards}, hw).seconds;
  ShardedMatmul s;
  // The all-reduce's effective bandwidth (latency included) makes it the roofline's comms term.
  s.roofline = roofline(flops, partial_bytes, peak, partial_bytes / t_comms);
  s.critical_d = t_comms * shards * peak / (2.0 * m.b * m.f);
  return s;
}

}  // namespace shardlab::cost
