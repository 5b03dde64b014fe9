// Serving (book chapters "inference" and "applied-inference"): what a slice of chips holds
// and delivers once the weights are loaded -- free HBM and the largest batch, decode runs
// and queries per second, how far generation can be model-sharded, 2D weight-stationary
// layouts, KV-cache eviction, prefix caches, prefill/decode disaggregation and the best
// slice under a step-latency limit. Decode and prefill steps themselves are
// inference/prefill_decode.h's estimate_decode / estimate_prefill.
//
// Dimension letters: B batch (sequences decoded together), T context (KV length), D model
// width, F MLP hidden width, Y model-parallel chips, P prompt tokens, G generated tokens.
//
//   ServedModel m{.params = 70e9, .matmul_params = 70e9, .kv_bytes_per_token = 162e3};
//   SliceMemory s = slice_memory(m, DType::kBf16, 16, 8192, hardware("tpu-v5e"));  // s.max_batch = 43
//   GenerationSharding g = generation_sharding(64, 8192, 28672, 32, {}, hardware("tpu-v5e"));
//   // g.ici_seconds = 11.7 us, g.hbm_seconds = 18.1 us, g.math_seconds = 4.77 us: HBM-bound
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/cost/inference/prefill_decode.h"

namespace shardlab::cost {

// HBM of `chips` chips after the weights (in `weights`), and the KV caches of `context`
// tokens that fill it (the book's "remaining HBM for KV caches" and "num KV caches @ 8k").
//   free      = chips x HBM - params x bytes(weights)
//   max_batch = floor(free / (context x kv_bytes_per_token)), 0 when the weights do not fit
struct SliceMemory {
  double hbm_bytes = 0;              // chips x HBM per chip
  double weight_bytes = 0;
  double weight_chips = 0;           // weight bytes / HBM per chip (the book's "min TPU v5es", 8.75)
  int weight_slice_chips = 0;        // the smallest power-of-two slice that holds the weights
  double free_bytes = 0;             // negative when the weights do not fit
  double kv_bytes_per_sequence = 0;  // context x KV bytes per token
  int64_t max_batch = 0;
};
// UserError on chips or context < 1 or a model without KV bytes per token.
SliceMemory slice_memory(const ServedModel& model, DType weights, int chips, int64_t context,
                         const HardwareProfile& hw);

// A decode run: `steps` tokens for each of the batch's sequences, every step priced as
// estimate_decode's step at the configured context (the book's approximation: the caches
// are sized for the whole context from the start).
//   seconds = steps x step;  queries/s = batch / seconds;  per chip = that / chips
// `step_seconds` > 0 takes the step as given instead (a measured step, or a figure such as
// applied-inference.md's 19 ms): tokens/s and the run follow it, the rest stays priced.
struct DecodeRun {
  DecodeEstimate step;
  int64_t steps = 0;
  double seconds = 0;                // one sequence's whole generation
  double tokens = 0;                 // batch x steps
  double queries_per_second = 0;     // finished sequences per second on the slice
  double queries_per_second_per_chip = 0;
};
DecodeRun decode_run(const ServedModel& model, const InferenceConfig& config, int64_t steps,
                     const HardwareProfile& hw, double step_seconds = 0);

// One model-sharded decode matmul X[B, D] . W[D, F_Y] over Y chips (activations moved, the
// weights stationary), per chip (book "inference", generation; "applied-inference", 4x8):
//   T_ici  = B D bytes(act) / W_ici            (all-gather the activations; W_ici = allgather_bandwidth)
//   T_hbm  = D F bytes(w) / (Y W_hbm)          (load this chip's weights)
//   T_math = 2 B D F / (Y C)
// ICI exceeds HBM once Y > F bytes(w) / (B bytes(act) beta), beta = W_hbm / W_ici (the book's
// Y > F / (B beta), beta ~ 8 on v5e); past it sharding further no longer cuts latency.
// compute_bound_max_y is the training bound M_Y F W / C (the book's F n_axes / 2550).
// The activations' collective turns latency-bound when each of the Y shards is under one
// hop's worth of bytes, B D a / Y < W_link t (inference.md, Appendix C: 45 kB per shard on
// v5e, so 360 kB for 8-way; in int8, Y > B D / 45,000): latency_bound_y = B D a / (W_link t).
struct GenerationSharding {
  double ici_seconds = 0;
  double hbm_seconds = 0;
  double math_seconds = 0;
  double beta = 0;               // W_hbm / W_ici
  double max_y = 0;              // Y above which T_ici > T_hbm
  double compute_bound_max_y = 0;
  double latency_bound_y = 0;    // Y above which the activation all-gather is latency-bound
  const char* bound = "";        // "ici", "hbm" or "compute": the largest of the three
};
struct ShardingDTypes {
  DType weights = DType::kBf16;
  DType activations = DType::kBf16;
  int axes = 1;  // torus axes the model axis spans (W_ici and the training bound scale with it)
};
GenerationSharding generation_sharding(int64_t batch, int64_t d, int64_t f, int y, const ShardingDTypes& types,
                                       const HardwareProfile& hw);

// 2D weight-stationary MLP (book "inference", Question 7; ESTI): W_in[D_X, F_YZ] and
// W_out[F_YZ, D_X] over N = X x YZ chips, activations sharded over D:
//   T_2D   = B D a / (X W) + 2 B F a / (YZ W)   (AllGather_YZ + ReduceScatter_YZ of [B, D_X],
//                                                AllReduce_X of [B, F_YZ]; a = bytes(act))
//   best X = sqrt(N D / (2 F)), giving T_2D = 2 B a sqrt(2 D F / N) / W   (the book's 11.3 BD / (sqrt(N) W))
//   1D (Megatron over all N chips on 3 axes): T_1D = 2 B D a / (3 W)   (the book's 4BD / 3W)
//   2D beats 1D once N > 18 F / D (72 chips for F = 4 D)
//   T_math = 4 B D F / (N C)  (both matmuls)
// With x > 0 the comms are priced at that X (YZ = N / X) instead of the optimum.
struct WeightStationary2d {
  double x = 0, yz = 0;          // the X priced (the optimum unless given) and N / X
  double optimal_x = 0;
  double comms_2d_seconds = 0;
  double comms_1d_seconds = 0;
  double math_seconds = 0;
  double crossover_chips = 0;    // N above which 2D moves fewer bytes than 1D
};
WeightStationary2d weight_stationary_2d(int64_t batch, int64_t d, int64_t f, int chips, double x, DType activations,
                                        const HardwareProfile& hw);

// Traffic through a decode batch ("applied-inference", eviction): with P-token prompts and
// G-token generations each slot frees every G steps, so per step B / G sequences finish
// and B (P + G) / G tokens of KV cache are evicted.
struct Eviction {
  double sequences_per_step = 0;
  double tokens_per_step = 0;
  double bytes_per_step = 0;     // tokens x KV bytes per token
};
Eviction eviction(int64_t batch, int64_t prompt, int64_t generated, double kv_bytes_per_token);

// Disaggregated serving ("applied-inference"): prefill servers take one prompt per
// prefill_seconds; a decode server finishes batch sequences per step_seconds x G. Keeping
// both saturated needs prefill_seconds x batch / (step_seconds x G) prefill servers per
// decode server (the book's P = 3G). For `queries_per_second` of traffic (0: none given):
// ceil(qps x prefill_seconds) prefill and ceil(qps x step_seconds x G / batch) decode servers.
// Interleaved on one server instead (prefills pause the decode batch), each query costs its
// prefill plus its share of the decode steps: 1 / (prefill_seconds + step_seconds x G / batch).
struct Disaggregation {
  double prefill_per_decode = 0;
  double prefill_server_qps = 0;   // 1 / prefill_seconds
  double decode_server_qps = 0;    // batch / (step_seconds x G)
  double interleaved_qps = 0;      // one server doing both
  int64_t prefill_servers = 0;     // for the traffic; 0 without it
  int64_t decode_servers = 0;
};
Disaggregation disaggregation(double prefill_seconds, double step_seconds, int64_t batch, int64_t generated,
                              double queries_per_second);

// Prefix caching ("inference", Prefix Caching): a cached prefix of `cached` tokens of a
// `prompt`-token prompt leaves (prompt - cached) / prompt of the prefill to compute, and
// `cache_bytes` (free HBM on a prefill server, or host DRAM) holds the caches of
// floor(cache_bytes / (prompt x KV bytes per token)) whole prompts (LRU entries).
// UserError unless 0 <= cached < prompt (the prompt's last token is always prefilled).
struct PrefixCache {
  double prefill_fraction = 1;   // of the prompt's tokens still computed
  int64_t prompts_held = 0;
};
PrefixCache prefix_cache(int64_t prompt, int64_t cached, double cache_bytes, double kv_bytes_per_token);

// The peak working activations of one decode step ("applied-inference" Q2, "roughly"; the
// book prints no figure): layers run one after another, so what is alive at once is one
// stage's tensors for the batch's one new token each, in `activations`:
//   attention  B (2D + (N + 2K) H + N H)   residual, norm, Q/K/V, attention output
//   MLP        B (2D + 3F) gated (gate, up, product), B (2D + 2F) otherwise; an MoE
//              token's k experts k times the F part
//   head       B (D + V)                   final norm and logits
// and the peak is the largest. Beside B T KV bytes of cache this is small (LLaMA 3-8B at
// B = 240: 63 MB). A fused attention kernel streams the scores; unfused, one layer's
// scores [B, N, T] (T = the shape's context) sit beside the attention stage's tensors:
//   unfused peak = max(peak, attention + B N T)   (LLaMA 3-8B, B = 240, T = 8192: 126 MB)
struct DecodeActivations {
  double attention_bytes = 0, mlp_bytes = 0, head_bytes = 0;
  double peak_bytes = 0;            // fused attention
  double scores_bytes = 0;          // one layer's [B, N, T]
  double unfused_peak_bytes = 0;
};
DecodeActivations decode_activations(const TransformerShape& s, int64_t batch, DType activations = DType::kBf16);

// The best decode throughput under a latency limit (book "applied-inference", worked
// problem Q3: which slice and batch serve the most tokens per chip while each decode step
// stays within a budget). Every power-of-two slice from the smallest that holds the weights
// up to `max_chips` is tried with the largest batch whose KV caches fit its free HBM at
// `context` and whose estimate_decode step is within `max_step_seconds` (the step grows with
// the batch, so a bisection finds it); the best slice serves the most tokens/s per chip
// (within 0.1%, the smallest such slice).
//
//   LatencyLimitedServing s = best_serving_under_latency(m, {.context = 8192, .weights = DType::kInt8},
//                                                        0.02, 64, hardware("tpu-v5e"));
//   s.slices[s.best].chips, s.slices[s.best].batch, s.slices[s.best].step.tokens_per_second_per_chip
struct LatencyLimitedSlice {
  int chips = 0;
  int64_t max_batch = 0;  // KV caches of `context` tokens the free HBM holds
  int64_t batch = 0;      // the largest within the limit; 0 when not even batch 1 meets it
  DecodeEstimate step;    // at `batch` (at batch 1 when batch is 0: how far off the limit is)
};

struct LatencyLimitedServing {
  std::vector<LatencyLimitedSlice> slices;  // smallest slice first
  int best = -1;                            // index of the most tokens/s per chip; -1: none meets the limit
};

// `config` gives the context, weight and activation dtypes (its batch and chips are
// ignored). UserError when the limit is not positive, max_chips is below the smallest
// slice that holds the weights, or the model has no KV bytes per token.
LatencyLimitedServing best_serving_under_latency(const ServedModel& model, const InferenceConfig& config,
                                                 double max_step_seconds, int max_chips, const HardwareProfile& hw);

}  // namespace shardlab::cost
