// One training step of a layout data x fsdp x context x pipe x expert x tensor (book
// chapters "training" and "applied-training"): its collectives per axis, memory per chip
// and predicted step time. The book's closed-form conditions, one axis at a time, are in
// training/axis_conditions.h; over a whole layout in training/tpu_conditions.h and
// training/gpu_conditions.h.
//
// Context parallelism, the book's "FSDP over the batch and sequence axes"
// (applied-training): once data x fsdp reaches the number of sequences, a `context` axis
// splits each sequence's T tokens (ceil(T / context) per chip, the last shard padded), so
// tokens per chip may fall below T. Parameters, gradients and optimizer state shard over
// fsdp x context, whose all_gathers and reduce_scatters run as one group. Attention reaches
// the other shards' keys and values by TrainConfig::context_comm (training/context_attention.h):
// a ring of ppermutes, each under the block attention it feeds, only what that compute
// does not hide exposed (train_gpt's default); or all_gathers of each layer's K and V
// (forward, backward and a recompute) and reduce_scatters of their gradients (LLaMA 3's).
// Not to be confused with Megatron's sequence parallelism, which splits the tensor axis's
// activations (TensorParallelConfig::sequence_parallel).
//
// The gradient reductions (fsdp x context reduce_scatter, data all_reduce, the expert axis's
// dense all_reduce) carry TrainConfig::precision.wire.reduce and the parameter all_gathers
// wire.gather, each call's V being wire_bytes of its values (network/wire_format.h).
//
//   TrainConfig cfg{.model = model_preset("llama2-13b"), .batch_tokens = 4 << 20};
//   StepEstimate e = estimate_train_step(cfg, Layout{.fsdp = 64, .tensor = 4}, hardware("tpu-v5p"));
//   e.step_seconds, e.memory.total(), e.comms (one entry per axis and collective)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "parallel/cost/model/transformer.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/training/context_attention.h"
#include "parallel/layout.h"
#include "parallel/pipeline/schedule.h"

namespace shardlab::cost {

// The layout a step is priced for: parallel::Layout, the runtime's own (parallel/layout.h),
// its degrees nested outermost first as data, fsdp, context, pipe, expert, tensor (the
// cost model's context axis inside fsdp); its `axes` are not read. What train_gpt chooses
// beside the mesh (zero, sequence_parallel, schedule, virtual_stages) the planner ranks as a
// candidate of its own on CPU ranks (TrainConfig::cpu_step). The data axis's zero is 0, 1
// or 2 here: an fsdp or context axis is ZeRO-3 whatever `zero` says.
using Layout = parallel::Layout;
// "data=2 fsdp=4 tensor=2 zero=1 (microbatches 4)": the degrees above 1 and the choices that apply.
std::string layout_summary(const Layout& layout);
// "DP", "FSDP+TP", "ZeRO-1+PP", "FSDP+CP+TP+SP", ... ("single" for one chip).
std::string strategy_name(const Layout& layout);

struct TrainConfig {
  TransformerShape model;
  double batch_tokens = 0;  // global batch, tokens per step
  nn::Remat remat = nn::Remat::None;
  TrainingPrecision precision;
  double efficiency = 1.0;  // achieved fraction of peak FLOP/s (MFU) for compute time
  // Count activations as shardlab's own autograd keeps them (model/autograd_activations.h: every
  // intermediate, attention probabilities, logits) instead of the book's fused-kernel count.
  bool shardlab_activations = false;
  // With shardlab_activations under bf16: the bytes per element of the operand a matmul
  // keeps (0 fp32; 2 with oneDNN's bf16 kernels; 4 on the rounded path's fp32 copies).
  double matmul_copy_bytes = 0;
  ContextComm context_comm = ContextComm::kRing;  // attention over the context axis
  // Price the step as train_gpt predicts its own on CPU ranks (the planner's --cluster
  // local): compute adds the element-wise work, the optimizer's pass and the experts' empty
  // slots at the memory bandwidth (training/cpu_step.h), slowed by core_sharing where the
  // ranks' threads outnumber the cores; the step is that compute plus the communication
  // that cannot hide -- the tensor, expert, context and pipe axes' (between a layer's
  // matmuls), and the data axes' beyond what the backward pass covers -- not
  // max(compute, communication).
  bool cpu_step = false;
  double core_sharing = 1;      // threads per core (cpu_step.h, core_sharing)
  // With cpu_step: a rank's compute span of a layout as measured on this machine (the
  // planner's --probe: examples/plan/layout_probe.h, timing stand-ins as train_gpt's start-up
  // probe does), in place of the FLOPs, element-wise work and optimizer at the profile's rates.
  std::function<double(const Layout&)> measured_compute;
  double capacity_factor = 0;   // an MoE model's expert capacity (0: dropless), for cpu_step
};

// One collective (or send/recv) the layout runs each step, with its total time.
struct AxisComm {
  std::string axis;  // data | fsdp | context | fsdp+context | pipe | expert | tensor
  std::string what;  // e.g. "all_reduce(grads)"
  CollectiveOp op = CollectiveOp::kAllGather;
  double bytes = 0;    // V of one call (network/collective.h), or bytes of one send
  int count = 0;       // calls per step
  double seconds = 0;  // all calls together
  std::string path;    // links used
  // Ring attention's ppermutes: of `seconds`, what each step's block attention hides; the
  // rest stalls the step (the block is awaited), so it adds to the step, not overlapping.
  double hidden = 0;
  bool stalls = false;
  // A parameter gather or gradient reduction that may run under compute (TrainConfig::cpu_step
  // hides it under the backward pass); activations, tokens, K/V blocks and ZeRO-1/2's gather
  // after the step are awaited where they are needed.
  bool overlappable = false;
};

struct StepEstimate {
  Layout layout;
  double flops_per_chip = 0;
  double tokens_per_chip = 0;  // of one step, padding included (under context parallelism < T)
  double padding_fraction = 0; // of the computed tokens that pad a sequence split unevenly
  double compute_seconds = 0;  // includes the pipeline bubble
  double bubble_fraction = 0;  // (p-1)/(m+p-1)
  std::vector<AxisComm> comms;
  double comm_seconds = 0;         // sum over comms, less what ring attention's compute hides
  double ring_exposed_seconds = 0; // of comm_seconds, the ring's stalls
  double step_seconds = 0;         // max(compute, other comm) + ring stalls: communication overlapped
                                   // (TrainConfig::cpu_step: compute + the communication that does not hide)
  bool cpu_step = false;           // priced as TrainConfig::cpu_step says
  double step_seconds_serial = 0;  // compute + comm: nothing overlapped
  TrainingMemory memory;           // per chip, FSDP prefetch buffers counted as params
  bool fits = false;               // memory.total() <= hbm_bytes
  bool compute_bound = false;      // compute_seconds >= comm_seconds
  std::string bottleneck;          // "compute" or the axis whose traffic dominates
};

// Empty when the layout can run this model and batch; otherwise why not (e.g. "tensor=16
// does not divide heads N=12"). The batch's sequences must split evenly over
// data x fsdp x expert x microbatches; the context axis may leave a padded last shard but
// not exceed T. train_gpt (shardlab_activations) cuts T into 2 x context head-tail chunks
// exactly and, as its layout validator (parallel/layout.cpp), trains no context axis
// beside a pipe axis or with an MoE model.
std::string layout_problem(const TrainConfig& config, const Layout& layout);
// Throws UserError with layout_problem() when the layout is invalid.
StepEstimate estimate_train_step(const TrainConfig& config, const Layout& layout, const HardwareProfile& hw);

// The train_gpt prediction: compute time of one step of `tokens` tokens at peak FLOP/s in
// `compute` (fp32 for shardlab on CPU), no communication.
double predicted_train_step_seconds(const TransformerShape& shape, int64_t tokens, const HardwareProfile& hw,
                                    DType compute = DType::kFp32, nn::Remat remat = nn::Remat::None);

// The collective of one mesh axis inside a layout of `chips` chips, `inner` of which lie on
// axes nested inside it. Torus: torus_axis_collective (network/multipod.h): ICI on the physical
// axes it spans within a pod, DCN once the inner axes fill pods, both (hierarchical) when
// it straddles pods. GPU: NVLink while inner x size fits a node; over
// whole nodes the fat tree (fat_tree_axis_collective, the inner axes as its inner axis);
// otherwise hierarchical NVLink + InfiniBand, or InfiniBand rails alone once the inner
// axes fill a node.
CollectiveCost axis_collective(CollectiveOp op, double bytes, int size, int inner, int chips,
                               const HardwareProfile& hw);

}  // namespace shardlab::cost
