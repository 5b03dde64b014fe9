// Mixed precision: which dtype each part of a step runs in (FSDP2's MixedPrecisionPolicy).
//
// Master weights and optimizer state are always fp32. Under a bf16 policy every matmul --
// linear layers, attention's batched matmuls, the experts' grouped GEMMs, the head --
// takes bf16 operands and accumulates in fp32; norms, softmax, the loss, routing and the
// optimizer compute in fp32. `reduce` is the dtype gradients are reduced in.
//
// How a bf16 matmul runs is a separate, per-machine choice (Bf16Matmul): oneDNN's bf16
// kernels, or the fp32 kernels fed bf16-rounded operands. Both compute the same products
// (a product of two bf16 values is exact in fp32) and accumulate in fp32, so the choice
// changes speed, not results beyond summation order. select_bf16_matmul() makes it from
// the CPU's flags and a measurement, so bf16 never runs slower than fp32 unnoticed.
//
//   const PrecisionScope bf16({.compute = DType::kBF16, .matmul = Bf16Matmul::kNative});
//   Tensor y = ops::linear(x, w);   // bf16 operands, fp32 accumulation and output
#pragma once

#include <cstdint>
#include <string>

namespace shardlab {

// kInt8 is a wire format only (block-scaled int8, framework/ops/wire_format.h): what a
// collective's messages carry, never what a tensor holds or an op computes in.
enum class DType { kF32, kBF16, kInt8 };

const char* dtype_name(DType dtype);  // "fp32", "bf16", "int8"
int64_t dtype_bytes(DType dtype);     // 4, 2, 1 (int8's per-block exponents: wire_bytes())
// "fp32" or "bf16" (also "float32", "bfloat16"); UserError naming `flag` otherwise.
DType parse_dtype(const std::string& value, const std::string& flag);
// A wire format: parse_dtype's or "int8".
DType parse_wire_dtype(const std::string& value, const std::string& flag);

enum class Bf16Matmul {
  kNative,   // oneDNN bf16 kernels (avx512_bf16 / AMX dot products), fp32 accumulation
  kRounded,  // the fp32 kernels on bf16-rounded operands: bf16 numerics at fp32 speed
};
const char* bf16_matmul_name(Bf16Matmul path);  // "native", "rounded"

// What a thread's ops compute in (the autocast state).
struct ComputePrecision {
  DType compute = DType::kF32;
  Bf16Matmul matmul = Bf16Matmul::kRounded;
  bool bf16() const { return compute == DType::kBF16; }
};

const ComputePrecision& compute_precision();  // this thread's; fp32 unless a scope is alive

// Sets this thread's compute precision for its lifetime (nestable).
class PrecisionScope {
 public:
  explicit PrecisionScope(ComputePrecision precision);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  ComputePrecision previous_;
};

// A run's policy, chosen once and applied by parallel::ParallelModel.
struct PrecisionPolicy {
  DType compute = DType::kF32;  // matmul operands, the activations they save, the compute copy of weights
  DType reduce = DType::kF32;   // gradients on the wire when they are reduced (fp32, bf16, int8)
  DType gather = DType::kF32;   // ZeRO/FSDP parameter all_gathers on the wire: the compute dtype,
                                // or int8 under ZeRO-3 (--gather-dtype)
  DType activation = DType::kF32;  // activations and their gradients between model-parallel ranks
                                   // (tensor and sequence parallelism, pipeline messages, expert
                                   // all_to_alls) on the wire: the compute dtype, or fp32 or bf16
                                   // (--activation-dtype); sums still in fp32
  Bf16Matmul matmul = Bf16Matmul::kRounded;  // how this machine runs a bf16 matmul
  std::string matmul_reason;                 // why (select_bf16_matmul)
  std::string dtype_reason;                  // why this compute dtype, when it was chosen for the user
                                             // (train_gpt's --precision auto); "" otherwise

  ComputePrecision compute_precision() const { return {.compute = compute, .matmul = matmul}; }
  // One line for a run header, e.g. "bf16 compute, fp32 master weights and optimizer
  // state, gradients reduced in fp32; bf16 matmuls: native (...)".
  std::string describe() const;
};

// Number of matmuls run with bf16 operands so far, by path: proof that a bf16 run ran bf16.
int64_t bf16_matmuls(Bf16Matmul path);

// The machine's bf16 matmul path and why.
struct Bf16MatmulChoice {
  Bf16Matmul path = Bf16Matmul::kRounded;
  bool cpu_flag = false;        // avx512_bf16 or amx_bf16 in /proc/cpuinfo
  double bf16_gflops = 0.0;     // measured matmul rates on this thread team (0: not measured)
  double fp32_gflops = 0.0;
  std::string reason;           // one line for the run header
};

// What the matmuls of a run look like, for measuring which path is faster.
enum class Bf16Workload {
  kTraining,  // compute-bound GEMMs: a 512 x 512 x 512 product
  kDecoding,  // memory-bound: 8 rows against a 4096 x 4096 weight (64 MiB in fp32) held as
              // the path holds it (bf16 copies, framework/ops/compute_copies.h, or fp32)
};

// `requested`: "auto" (measure `workload`: native only where the CPU has bf16 instructions
// and its bf16 matmul beats fp32's by 10%), "native" or "rounded"; the environment variable
// SHARDLAB_BF16_MATMUL overrides it (the tests force both paths on any machine).
// UserError for anything else.
Bf16MatmulChoice select_bf16_matmul(const std::string& requested, Bf16Workload workload = Bf16Workload::kTraining);
// The path select_bf16_matmul takes, without measuring: the one forced, else for auto the
// bf16 kernels where the CPU has bf16 instructions (what auto picks there, unless they
// measure no faster than fp32), the rounded path elsewhere. For predictions (the planner).
Bf16Matmul expected_bf16_matmul(const std::string& requested);

// True when /proc/cpuinfo lists avx512_bf16 or amx_bf16.
bool cpu_has_bf16_instructions();

// What `--precision auto` (train_gpt's default) is on this machine alone: bf16 where the
// bf16 matmul path `auto` picks (select_bf16_matmul, training's workload) is oneDNN's bf16
// kernels, fp32 elsewhere, where bf16 would run on the fp32 units and only add
// conversions. The environment variable SHARDLAB_DEFAULT_PRECISION (fp32 or bf16) decides
// instead, without measuring; UserError naming it for anything else. A run of several
// ranks agrees on one answer (parallel/runtime/precision_choice.h).
struct DefaultPrecision {
  DType compute = DType::kF32;
  bool measured_native = false;  // bf16 because the bf16 kernels measured faster here
  std::string reason;            // one line for a run header
};
DefaultPrecision default_precision();

}  // namespace shardlab
