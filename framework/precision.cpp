#include "framework/precision.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "framework/error.h"
#include "framework/ops/matmul.h"

namespace shardlab {
namespace {

thread_local ComputePrecision t_precision;

// Best-of-`repeats` GFLOP/s of an [m, k] x [k, n] product with operands of type T.
template <typename T>
double matmul_gflops(int64_t m, int64_t k, int64_t n, int repeats) {
  std::vector<T> a(m * k), b(k * n);
  std::vector<float> c(m * n);
  const auto fill = [](std::vector<T>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      const float x = static_cast<float>((i * 7919) % 97) / 97.0f - 0.5f;
      if constexpr (std::is_same_v<T, float>) {
        v[i] = x;
      } else {
        v[i] = to_bf16(x);
      }
    }
  };
  fill(a);
  fill(b);
  double best = 1e30;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run creates the primitive
    const auto t0 = std::chrono::steady_clock::now();
    matmul_raw(a.data(), MatView::matrix(m, k, k), b.data(), MatView::matrix(k, n, n), c.data(), MatView::matrix(m, n, n));
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::min(best, t);
  }
  return 2.0 * static_cast<double>(m * k * n) / best / 1e9;
}

}  // namespace

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bf16";
    case DType::kInt8: return "int8";
    case DType::kF32: break;
  }
  return "fp32";
}
int64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return 2;
    case DType::kInt8: return 1;
    case DType::kF32: break;
  }
  return 4;
}

DType parse_dtype(const std::string& value, const std::string& flag) {
  if (value == "fp32" || value == "float32") return DType::kF32;
  if (value == "bf16" || value == "bfloat16") return DType::kBF16;
  if (value == "int8") {
    throw UserError(flag + " 'int8': int8 is a wire format for gradients and gathered weights "
                    "(--reduce-dtype, --gather-dtype), not a dtype shardlab computes in; use fp32 or bf16");
  }
  throw UserError(flag + " '" + value + "' is not a dtype shardlab trains in; use fp32 or bf16");
}

DType parse_wire_dtype(const std::string& value, const std::string& flag) {
  if (value == "int8") return DType::kInt8;
  if (value == "fp32" || value == "float32" || value == "bf16" || value == "bfloat16") return parse_dtype(value, flag);
  throw UserError(flag + " '" + value + "' is not a wire format; use fp32, bf16 or int8");
}

const char* bf16_matmul_name(Bf16Matmul path) { return path == Bf16Matmul::kNative ? "native" : "rounded"; }

const ComputePrecision& compute_precision() { return t_precision; }

PrecisionScope::PrecisionScope(ComputePrecision precision) : previous_(t_precision) { t_precision = precision; }
PrecisionScope::~PrecisionScope() { t_precision = previous_; }

std::string PrecisionPolicy::describe() const {
  std::string s = std::string(dtype_name(compute)) + " compute, fp32 master weights and optimizer state, gradients reduced " +
                  (reduce == DType::kF32 ? std::string("in fp32")
                                         : std::string("with ") + dtype_name(reduce) + " on the wire (fp32 sums" +
                                               (reduce == DType::kInt8 ? ", error feedback)" : ")"));
  if (gather != compute) s += std::string(", sharded parameters gathered as ") + dtype_name(gather);
  if (activation != compute) s += std::string(", activations between ranks in ") + dtype_name(activation);
  if (compute == DType::kBF16) s += "; bf16 matmuls: " + matmul_reason;
  if (!dtype_reason.empty() && dtype_reason != matmul_reason) s += "; " + dtype_reason;
  return s;
}

bool cpu_has_bf16_instructions() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      if (w == "avx512_bf16" || w == "amx_bf16") return true;
    }
    return false;
  }
  return false;
}

namespace {

// `requested`, or the path SHARDLAB_BF16_MATMUL forces; UserError unless auto, native or rounded.
std::string requested_bf16_matmul(const std::string& requested) {
  std::string mode = requested;
  if (const char* env = std::getenv("SHARDLAB_BF16_MATMUL"); env != nullptr && *env != '\0') mode = env;
  if (mode != "auto" && mode != "native" && mode != "rounded") {
    throw UserError("bf16 matmul path '" + mode + "' (--bf16-matmul or SHARDLAB_BF16_MATMUL) is not one of auto, native, rounded");
  }
  return mode;
}

}  // namespace

Bf16Matmul expected_bf16_matmul(const std::string& requested) {
  const std::string mode = requested_bf16_matmul(requested);
  if (mode == "auto") return cpu_has_bf16_instructions() ? Bf16Matmul::kNative : Bf16Matmul::kRounded;
  return mode == "native" ? Bf16Matmul::kNative : Bf16Matmul::kRounded;
}

Bf16MatmulChoice select_bf16_matmul(const std::string& requested, Bf16Workload workload) {
  const std::string mode = requested_bf16_matmul(requested);
  Bf16MatmulChoice c;
  c.cpu_flag = cpu_has_bf16_instructions();
  if (mode == "native") {
    c.path = Bf16Matmul::kNative;
    c.reason = std::string("bf16 kernels forced") + (c.cpu_flag ? "" : " (no avx512_bf16/amx_bf16: oneDNN emulates them)");
    return c;
  }
  if (mode == "rounded") {
    c.path = Bf16Matmul::kRounded;
    c.reason = "fp32 kernels on bf16-rounded operands, forced";
    return c;
  }
  if (!c.cpu_flag) {
    c.path = Bf16Matmul::kRounded;
    c.reason = "fp32 kernels on bf16-rounded operands: this CPU has no avx512_bf16/amx_bf16 (emulated bf16 GEMM is several times slower)";
    return c;
  }
  // Measured, not assumed: some CPUs with avx512_bf16 run oneDNN's bf16 GEMM slower than its
  // fp32 one, yet stream bf16 weights faster when decoding, which reads half the bytes.
  const bool decoding = workload == Bf16Workload::kDecoding;
  const int64_t m = decoding ? 8 : 512, k = decoding ? 4096 : 512, n = decoding ? 4096 : 512;
  c.fp32_gflops = matmul_gflops<float>(m, k, n, 3);
  c.bf16_gflops = matmul_gflops<Bf16>(m, k, n, 3);
  c.path = c.bf16_gflops > 1.1 * c.fp32_gflops ? Bf16Matmul::kNative : Bf16Matmul::kRounded;
  std::ostringstream why;
  why.precision(0);
  why << std::fixed << (c.path == Bf16Matmul::kNative ? "bf16 kernels: " : "fp32 kernels on bf16-rounded operands: ")
      << "measured bf16 " << (decoding ? "decode-shaped matmul " : "GEMM ") << c.bf16_gflops << " GFLOP/s vs fp32 "
      << c.fp32_gflops << " GFLOP/s on " << omp_get_max_threads() << " thread(s)";
  c.reason = why.str();
  return c;
}

DefaultPrecision default_precision() {
  DefaultPrecision d;
  if (const char* env = std::getenv("SHARDLAB_DEFAULT_PRECISION"); env != nullptr && *env != '\0') {
    d.compute = parse_dtype(env, "SHARDLAB_DEFAULT_PRECISION");
    d.reason = std::string(dtype_name(d.compute)) + " by default: SHARDLAB_DEFAULT_PRECISION=" + env;
    return d;
  }
  const Bf16MatmulChoice choice = select_bf16_matmul("auto");
  d.measured_native = choice.path == Bf16Matmul::kNative;
  d.compute = d.measured_native ? DType::kBF16 : DType::kF32;
  d.reason = d.measured_native ? "bf16 by default (--precision auto): " + choice.reason
                               : "fp32 by default (--precision auto): this CPU runs bf16 matmuls no faster than fp32 (" +
                                     choice.reason + ")";
  return d;
}

}  // namespace shardlab
