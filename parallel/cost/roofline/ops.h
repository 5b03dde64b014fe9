// Rooflines of ops other than the plain matmul (book chapters "roofline" and
// "transformers"): an elementwise op, a general einsum given its dimension sizes, and
// dot-product attention. Each returns the Roofline of roofline/roofline.h against HBM bandwidth.
//
//   Roofline e = einsum_roofline("bd,df->bf", {{'b', 4096}, {'d', 8192}, {'f', 32768}},
//                                {DType::kBf16}, hardware("tpu-v5e"));   // = matmul_roofline
//   Roofline dot = einsum_roofline("n,n->", {{'n', 1 << 20}}, {DType::kBf16}, v5e);   // intensity -> 1/2
//   AttentionRoofline a = attention_roofline({.batch = 1, .q_len = 8192, .kv_len = 8192, .heads = 64,
//                                             .kv_heads = 8, .head_dim = 128}, v5e);  // intensity T G/(G+1)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {

// `n` elements of `inputs` arrays read and one array written, all in `dtype`, with
// `flops_per_element` operations per element (x + y: 2 inputs, 1 FLOP). Peak FLOP/s is
// the matmul units' in `dtype`; elementwise work runs on slower vector units (TPU v5p's
// VPU: ~7e12 FLOP/s, the book's footnote), so give --flops to price those.
Roofline elementwise_roofline(double n, int inputs, double flops_per_element, DType dtype, const HardwareProfile& hw);

// The vector units' FLOP/s (TPU VPU, GPU CUDA cores): vector_alus x the clock, one op per
// ALU per cycle, no FMA (gpus.md Quiz 1 Q2: 16896 x 1.98e9 = 33.5e12 on an H100; tpus.md's
// Pop Quiz "Calculating VPU throughput": 8192 x 1.75e9 = 1.4e13 on a v5p). 0 without a clock.
double vector_flops(const HardwareProfile& hw);

// The clock at which the vector units reach `flops_per_second` with `flops_per_cycle` per ALU
// (gpus.md Quiz 1 Q6: a B200's 80e12 fp32 FLOP/s, 2 per cycle as FMAs, over its 18944 ALUs:
// 80e12 / 37888 = 2.1 GHz). UserError unless both are positive.
double clock_for_vector_flops(const HardwareProfile& hw, double flops_per_second, double flops_per_cycle);

// "bd,df->bf": operand letters, comma-separated, then "->" and the output's letters.
struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
  std::string letters() const;     // every distinct letter, in order of appearance
  std::string contracted() const;  // letters of the inputs that the output drops
};
// UserError naming the spec when it has no "->", no inputs, a non-letter, a letter
// repeated within one operand, or an output letter no input has.
EinsumSpec parse_einsum(const std::string& spec);

// FLOPs: 2 x the product of every distinct dim (a multiply and an add per point of the
// iteration space) when two or more inputs meet over contracted dims; 1 x that product
// otherwise (an elementwise product, an outer product, a one-input sum). Bytes: every
// input read and the output written once (the book's bytes). `dtypes`: one for all
// operands, or one per input and then the output; the math runs in the widest input.
// UserError naming a letter without a size.
Roofline einsum_roofline(const std::string& spec, const std::map<char, int64_t>& dims,
                         const std::vector<DType>& dtypes, const HardwareProfile& hw);

// softmax(Q K^T) V for a batch of sequences: T query positions against S key/value
// positions, N query heads sharing K key/value heads (G = N/K) of dim H.
struct AttentionShape {
  int64_t batch = 1;   // sequences
  int64_t q_len = 0;   // T (1 when decoding)
  int64_t kv_len = 0;  // S (= T for self-attention over a whole sequence)
  int64_t heads = 0;   // N
  int64_t kv_heads = 0;  // K
  int64_t head_dim = 0;  // H
  DType dtype = DType::kBf16;
};
struct AttentionRoofline {
  Roofline roofline;  // 4 B T S N H FLOPs; Q and O written/read plus K and V read: b (2 B T N H + 2 B S K H) bytes
  // Self-attention (S = T) turns compute-bound above this context: T G / (G + 1) >= critical
  // in bf16 (T > 480 for MHA on v5e).
  double compute_bound_context = 0;
  // Decoding one token (T = 1) against a long cache: intensity -> G in bf16 (2N / (b K)).
  double decode_intensity_limit = 0;
};
// UserError on non-positive sizes or K not dividing N.
AttentionRoofline attention_roofline(const AttentionShape& a, const HardwareProfile& hw);

}  // namespace shardlab::cost
