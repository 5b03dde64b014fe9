// The book's compute-bound conditions (chapter "training") evaluated for one concrete
// layout over all its mesh axes at once, and across pods (network/multipod.h), instead of one axis
// at a time (the per-axis forms are in training/axis_conditions.h).
//
// Within one ICI domain (a pod, or the whole slice if smaller) of N chips holding B tokens,
// with the layout's batch axes inside the pod X = fsdp x context over M_X torus axes, a
// data axis D inside the pod over M_D axes, tensor Y over M_Y axes (pipe and expert lie
// outside the book's closed forms and only shrink each group's share), alpha = C / W_ici,
// each M the torus axes the group's collectives are priced on (torus_axes_spanned):
//   FSDP traffic hides iff tokens per member and gather B / (D X m) > alpha / M_X (the
//     weights are gathered once per each of the m microbatches)
//   TP iff Y < M_Y F / alpha
//   DP inside the pod iff tokens per data replica B / D > alpha / M_D
//   such an X x Y split exists at all iff B / N > alpha^2 / (M_X M_Y F), best at
//     X_opt = sqrt(B N M_X / (F M_Y))  (the book's max form: the two axes overlap)
//   ring attention over a context axis c (TrainConfig::context_comm) iff each chip's
//     Tq = T / c positions of a sequence > C K bytes / (2 N W v) (axis_conditions.h)
// The DP and FSDP bars assume the book's bf16 wires; TrainingPrecision::wire scales them by
// wire_critical_factor (training/axis_conditions.h): fp32 gradients double them, int8 ones
// about halve them.
// The book's comm/compute ratio of the layout is the largest of those ratios (< 1: compute-
// bound), the DCN one below included. Across pods, the batch axes outside the pod run
// over DCN and hide iff the batch per pod > C / W_dcn (dcn_critical_batch_per_pod, the
// book's condition for pure data parallelism across pods); beside it, the estimate's own
// collectives whose group crosses pods (a DCN all_reduce, or FSDP gathers straddling pods,
// their ICI part included) against the backward pass (2/3 of the step's compute) that the
// book's gradient all_reduce overlaps.
//
//   StepEstimate e = estimate_train_step(cfg, layout, hardware("tpu-v5p"));
//   LayoutConditions k = layout_conditions(cfg, e, hardware("tpu-v5p"));
//   k.compute_bound_by_book, k.fsdp_axes, k.dcn_hidden
#pragma once

#include "parallel/cost/training/train_step.h"

namespace shardlab::cost {

struct LayoutConditions {
  int pods = 1;                // pods the layout spans
  int chips_per_domain = 1;    // N: chips of one ICI domain
  double tokens_per_chip = 0;  // B / N (padding included)
  double tokens_per_pod = 0;   // the global batch / pods
  double alpha = 0;            // C / W_ici, tokens per chip
  // Axis groups inside a pod: their size there and the torus axes they span (the book's M).
  int data = 1, data_axes = 1;      // D, M_D
  int fsdp = 1, fsdp_axes = 1;      // X = fsdp x context, M_X
  int tensor = 1, tensor_axes = 1;  // Y, M_Y
  double tokens_per_data_replica = 0;  // B / D
  double dp_critical = 0;              // alpha / M_D
  double tokens_per_fsdp_member = 0;   // B / (D X)
  double fsdp_critical = 0;            // alpha / M_X
  double tp_max_degree = 0;            // M_Y F / alpha
  double fsdp_tp_critical = 0;         // alpha^2 / (M_X M_Y F), tokens per chip
  double x_opt = 0;                    // sqrt(B N M_X / (F M_Y))
  int context = 1;                     // the context axis (the whole of it, rings stay in place)
  double ring_tokens_per_shard = 0;    // Tq = ceil(T / c); 0 without a ring
  double ring_critical = 0;            // C K bytes / (2 N W v), positions per chip
  double comm_to_compute = 0;          // the largest of the terms above as T_comms / T_math
  bool compute_bound_by_book = false;  // comm_to_compute <= 1
  // Across pods (0 / true when the layout stays in one pod).
  int dcn_ways = 1;                 // batch-axis chips across pods that meet over DCN
  double dcn_critical_per_pod = 0;  // C / W_dcn, tokens per pod
  bool dcn_hidden = true;           // the book's: tokens_per_pod > dcn_critical_per_pod
  double dcn_crossing_seconds = 0;  // the estimate's collectives on path dcn or ici+dcn
  double backward_seconds = 0;      // 2/3 of the step's compute: what the gradient sync hides under
  bool dcn_crossing_hidden = true;  // dcn_crossing_seconds <= backward_seconds
};

// The conditions of estimate.layout for config on hw (estimate from estimate_train_step).
LayoutConditions layout_conditions(const TrainConfig& config, const StepEstimate& estimate,
                                   const HardwareProfile& hw);

}  // namespace shardlab::cost
