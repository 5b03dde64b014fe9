// Inference (book chapters "inference" and "applied-inference"): prefill and decode step
// time, throughput, memory and the smallest slice that holds a model and its KV cache.
//
// Decode of batch B at context T on n chips (weights and KV sharded over all of them):
//   T_params    = max(weight bytes / (n HBM B/s), 2 B N_matmul / (n C))   (the MLP/projections)
//   T_attention = max(B T kv_bytes_per_token / (n HBM B/s), B 4 T N H L / (n C))
//   step = T_params + T_attention  (separate ops, each its own roofline; no cross-overlap)
// Small batches are memory-bound (step ~ bytes / bandwidth); weights turn compute-bound once
// B exceeds the matmul critical batch (~240 on v5e in bf16, ~120 with int8 weights).
// Prefill of T tokens: FLOPs 2 N_matmul T + attention, at `efficiency` of peak.
//
//   ServedModel m = served_model(model_preset("llama2-13b"), DType::kBf16);
//   DecodeEstimate d = estimate_decode(m, {.batch = 32, .context = 8192, .chips = 8}, hardware("tpu-v5e"));
#pragma once

#include "parallel/cost/model/transformer.h"

namespace shardlab::cost {

// What serving needs to know about a model (from a shape, or straight from the book's
// "a 30B model with 100 kB of KV per token").
struct ServedModel {
  double params = 0;                  // all weights held in memory
  double matmul_params = 0;           // weights a token multiplies by (2 FLOPs each)
  double kv_bytes_per_token = 0;      // cache bytes per token of context
  double attention_flops_per_token_context = 0;  // 4 N H L: attention FLOPs per token per context position
};
ServedModel served_model(const TransformerShape& shape, DType kv);

struct InferenceConfig {
  int64_t batch = 1;     // sequences decoded (or prefilled) together
  int64_t context = 0;   // KV length for decode, prompt length for prefill
  int chips = 1;         // weights and KV sharded over all of them
  DType weights = DType::kBf16;
  DType activations = DType::kBf16;
  double efficiency = 1.0;  // fraction of peak FLOP/s reached (prefill MFU)
};

struct DecodeEstimate {
  double weight_bytes = 0;        // whole model
  double kv_bytes = 0;            // whole batch's cache
  double memory_per_chip = 0;     // (weights + KV) / chips
  double params_seconds = 0;      // roofline of the weight matmuls
  double attention_seconds = 0;   // roofline of attention over the cache
  double step_seconds = 0;        // one token for every sequence of the batch
  double tokens_per_second = 0;   // batch / step
  double tokens_per_second_per_chip = 0;
  bool memory_bound = false;      // both parts bandwidth-bound
  double critical_batch = 0;      // batch above which the weight matmuls are compute-bound
  bool fits = false;              // memory_per_chip <= hbm_bytes
  int min_chips = 0;              // ceil((weights + KV) / hbm_bytes)
};

struct PrefillEstimate {
  double flops = 0;            // per sequence: 2 N_matmul T + attention (T^2 4 N H L)
  double matmul_flops = 0;     // the 2 N_matmul T part (the book's estimate)
  double seconds = 0;          // batch of sequences, compute at efficiency (or memory if slower)
  double tokens_per_second = 0;
  bool compute_bound = false;
};

DecodeEstimate estimate_decode(const ServedModel& model, const InferenceConfig& config, const HardwareProfile& hw);
PrefillEstimate estimate_prefill(const ServedModel& model, const InferenceConfig& config, const HardwareProfile& hw);

// Chips of the smallest power-of-two slice holding `bytes` (the book rounds up to slices).
int slice_chips(double bytes, const HardwareProfile& hw);

}  // namespace shardlab::cost
