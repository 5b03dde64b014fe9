// The book's compute-bound conditions one mesh axis at a time (chapter "training"), for any
// hardware profile. With C the chip's FLOP/s and W = allgather_bandwidth() (2 x ICI link
// per torus axis, NVLink egress per GPU), backward compute 4 x params x tokens overlaps the
// gradient all-reduce 4 x params / W (bf16), so:
//   DP / FSDP stay compute-bound iff tokens per chip > C / W            (2550 on TPU v5p)
//     -- with b bytes per parameter on the wire, > (b / 2) C / W: twice that for fp32
//     gradients, about half for int8 ones (dp_critical_batch's `wire`)
//   TP of degree Y over M_Y axes iff Y < M_Y F W / C
//   FSDP(X over M_X axes) + TP(Y over M_Y) iff B / N > (C/W)^2 / (M_X M_Y F),
//     best at X = sqrt(B N M_X / (F M_Y)).
//   Ring attention over a context axis hides its K/V traffic iff a ring step's block
//     attention, 4 Tq Tk N H FLOPs x the visible fraction v at C, outlasts the block's
//     2 Tk K H bytes over one link direction W (training/context_attention.h):
//     Tq > C K bytes / (2 N W v) positions of each sequence per chip (v5p, LLaMA 3's
//     N/K = 8 in bf16, v = 1/2 with head-tail balance: 1275).
// training/tpu_conditions.h and training/gpu_conditions.h evaluate them over a whole layout.
//
//   double alpha = dp_critical_batch(hardware("tpu-v5p"));              // 2550 tokens per chip
//   FsdpTpSplit s = optimal_fsdp_tp_split(4 << 20, 28672, 8192, 1, 1);  // s.fsdp, s.tensor
//   BatchScale b = batch_scale(dp_critical_batch(hardware("tpu-v5p"), 3), 16e6, 8960);
//   // b.max_chips = 18,823 for a 16M-token batch; b.min_batch_tokens = 7.6M for a pod
#pragma once

#include <cstdint>

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/network/wire_format.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {

// Tokens per chip above which DP/FSDP gradient traffic hides under backward compute.
// across_nodes: the axis crosses nodes/pods (W = node_size x W_dcn; per pod/node multiply
// the result by node_size). `wire`: what the gradient all_reduce carries
// (network/wire_format.h). With b bytes per parameter on the wire the all_reduce of P
// parameters takes 2 b P / W against the backward's 4 P B / C, so the bar is (b / 2) C / W:
// the book's C / W for its bf16 gradients, 2 C / W for fp32, (1 + 1/256) / 2 C / W for int8
// (v5p: 5100, 2550, 1280 tokens per chip).
double dp_critical_batch(const HardwareProfile& hw, int axes = 1, bool across_nodes = false,
                         DType compute = DType::kBf16, DType wire = DType::kBf16);
// How many times the book's bf16 bar (C / W) a batch group's bar is when its collectives
// carry `wire` (b bytes per parameter, network/wire_format.h): DP's gradient all_reduce
// under the backward, b_reduce / 2; FSDP's (`sharded`) forward gather under the forward,
// b_gather / 2, and its backward gather and reduce_scatter under the backward,
// (b_gather + b_reduce) / 4, whichever is larger. 1 for bf16 wires, 2 for fp32.
double wire_critical_factor(const WireDtypes& wire, bool sharded);
// An MoE layer's experts each see k/E of the tokens, so every per-chip batch condition on
// their weights (DP/FSDP traffic hidden, the matmuls compute-bound) needs E/k times the
// dense layer's batch: critical_batch x E / k.
double moe_critical_batch(double dense_critical_batch, int64_t experts, int64_t top_k);
// Largest tensor-parallel degree that stays compute-bound: M_Y F W / C.
double tp_max_degree(int64_t d_ff, const HardwareProfile& hw, int axes = 1, DType compute = DType::kBf16);
// The tensor-parallel degree to use under the bound Y < max_degree: the largest power of
// two below it (so heads and F split evenly), and at most one node of `node_size` unless it
// reaches two whole nodes (gpus.md Quiz 5 Q2: F / 1995 = 14.4 on H100 nodes of 8 "doesn't
// span 2 nodes, [so] we'd go up to 8-way"). At least 1.
int tp_degree(double max_degree, int node_size);
// Tokens per chip above which FSDP + TP stays compute-bound: (C/W)^2 / (M_X M_Y F).
double fsdp_tp_critical_batch(int64_t d_ff, const HardwareProfile& hw, double fsdp_axes, double tensor_axes,
                              DType compute = DType::kBf16);

// Positions of each sequence per chip (Tq = T / context) above which ring attention's K/V
// transfers hide under each step's block attention: C K bytes / (2 N W visible), W =
// hw.ici (one direction of one link; NVLink egress on GPUs). Heads and kv heads per chip
// (under tensor parallelism both divide, so only their ratio matters).
double ring_attention_critical_tokens(const HardwareProfile& hw, double heads, double kv_heads,
                                      double bytes_per_element, double visible = 0.5,
                                      DType compute = DType::kBf16);

struct FsdpTpSplit {
  double x_opt = 0;  // sqrt(B N M_X / (F M_Y)), continuous
  int fsdp = 1;      // the power of two nearest x_opt (log scale), at most `chips`
  int tensor = 1;    // the largest power of two with fsdp x tensor <= chips (the book's
                     // rounding: 2048 x 4 = 8192 of a pod's 8960 chips)
  // A layout of exactly `chips`: tensor a power of two that divides them, fsdp = chips /
  // tensor the nearest x_opt (log scale; 8960 chips, x_opt 1618: 2240 x 4). Equal to
  // fsdp, tensor when chips is a power of two.
  int whole_fsdp = 1;
  int whole_tensor = 1;
};
FsdpTpSplit optimal_fsdp_tp_split(double batch_tokens, int64_t d_ff, int chips, double fsdp_axes,
                                  double tensor_axes);

// How far a per-chip batch bound scales (training.md, "Data Parallelism" and "Scaling
// Across Pods"): chips stay compute-bound while each holds more than `critical_per_chip`
// tokens, so a global batch of `batch_tokens` keeps at most batch / critical chips busy
// (16M tokens over v5p's 850: 18,823 chips) and `chips` chips need a global batch of at
// least chips x critical (a 8960-chip pod: 7.6M tokens). UserError on a non-positive bound.
struct BatchScale {
  double critical_per_chip = 0;
  double max_chips = 0;         // batch_tokens / critical_per_chip (continuous)
  double min_batch_tokens = 0;  // chips x critical_per_chip
};
BatchScale batch_scale(double critical_per_chip, double batch_tokens, int64_t chips);

}  // namespace shardlab::cost
