// The book's compute-bound conditions on GPU clusters (chapter "gpus", "Rooflines for LLM
// Scaling on GPUs") evaluated for one concrete layout: the GPU counterpart of
// training/tpu_conditions.h, whose tori and DCN do not apply to a switched network.
//
// C is the GPU's FLOP/s, W_collective the bandwidth at which a group's all_gather runs:
// NVLink egress per GPU within a node, the node's egress past it (network/fat_tree.h), each level's
// D/(D-1) included, and -- for the batch group -- multiplied by the model-parallel GPUs
// nested inside it (the book's "cost of the outer reduction is reduced by a factor of the
// number of nodes spanned by the inner axis"). With the layout's axes
// batch X = data x fsdp x context outside model parallelism Y = pipe x expert x tensor:
//   DP / FSDP (ZeRO-1/3) hide iff tokens per GPU B/N > C / W_collective(X, inner Y)
//     (the book's 2200 in a node, 2475 past it, 309 with 64-way model parallelism over
//     8 nodes inside; FSDP gathers once per microbatch, so B/(N m) then), E/k times that
//     for an MoE's expert weights
//   TP of degree Y_t iff Y_t < F W_collective(Y_t) / C
//   EP of degree Z, l of its members per node, past the node: the two AllToAlls
//     T_comms / T_math = C (Z - l) min(l k / Z, 1) / (W_node k F) < 1 (book: l = 8)
//   PP over p stages, m microbatches: (m + p - 2) hops of 2 (B/m) D bytes, against the
//     step's compute (the book: "basically free")
// The book's ratio of the layout is the largest of these (< 1: compute-bound).
// The batch group's bar is the book's for bf16 wires, scaled by wire_critical_factor
// (training/axis_conditions.h) for the layout's TrainingPrecision::wire.
// With SHARP (in-network reduction, network/fat_tree.h), pure DP's gradient AllReduce costs V / W
// instead of two all_gathers' 2 V (D-1)/D / W, so its W_collective is 2 V / T_SHARP: in
// theory it halves the bound (the book: 2200 -> 1100 in a node, 2475 -> 1237 past it;
// measured, ~30% more bandwidth). FSDP's AllGathers and groups not of whole nodes keep theirs.
//
//   StepEstimate e = estimate_train_step(cfg, layout, hardware("h100"));
//   GpuConditions g = gpu_conditions(cfg, e, hardware("h100"));
//   g.batch_critical, g.tp_max_degree, g.compute_bound_by_book
#pragma once

#include "parallel/cost/training/train_step.h"

namespace shardlab::cost {

struct GpuConditions {
  int node_size = 1;            // GPUs per NVLink domain
  double tokens_per_gpu = 0;    // B / N (padding included)
  double alpha_gpu = 0;         // C / W_nvlink: the book's per-GPU bar within a node (2200 on H100)
  double alpha_node = 0;        // C / W_node_egress: the bar past a node (2475 on H100)
  // Batch group X = data x fsdp x context, with model-parallel GPUs Y nested inside it.
  int batch = 1, batch_inner = 1;
  int batch_nodes = 1;                 // nodes the batch group with its inner axes spans
  bool batch_sharp = false;            // the batch group's AllReduce priced with SHARP
  double batch_bandwidth = 0;          // W_collective of the batch group, bytes/s (inner Y included)
  std::string batch_path;              // links it runs on, as axis_collective names them
  double tokens_per_gather = 0;        // B / (N m) under FSDP with m microbatches, else B / N
  double batch_critical = 0;           // C / batch_bandwidth, tokens per GPU
  double moe_batch_critical = 0;       // E/k x batch_critical (0 for a dense model)
  // Tensor group.
  int tensor = 1;
  double tensor_bandwidth = 0;  // W_collective of the tensor group
  double tp_max_degree = 0;     // F W_collective / C
  // Expert group.
  int expert = 1, expert_per_node = 1;  // Z, l
  double ep_ratio = 0;                  // T_comms / T_math of the AllToAlls (0 within a node)
  // Pipeline.
  int pipe = 1, microbatches = 1;
  double pp_seconds = 0;  // (m + p - 2) hops of the activations
  double pp_ratio = 0;    // pp_seconds / the step's compute
  double comm_to_compute = 0;          // the largest of the ratios above
  bool compute_bound_by_book = false;  // comm_to_compute <= 1
};

// The conditions of estimate.layout for config on hw (with hw.sharp: in-network reduction
// for pure DP); UserError for a torus (use layout_conditions).
GpuConditions gpu_conditions(const TrainConfig& config, const StepEstimate& estimate, const HardwareProfile& hw);

}  // namespace shardlab::cost
