// Tensor parallelism (Megatron-LM; the book's training chapter): attention heads, MLP
// hidden units and the vocabulary split over the `tensor` axis, applied to a model from
// outside through its module hooks. Per block, t = tensor size, x[B, T, D]:
//
//   attention  f: identity forward, all_reduce of dx backward      (Megatron f)
//              wqkv column-parallel by head: N/t query heads and their kv heads
//              wo row-parallel: all_reduce of the partial x·Wo^T, then the bias (g)
//   MLP        f; fc (GELU) or gate and up (SwiGLU) column-parallel; fc2 or down
//              row-parallel, g
//   => forward: two all_reduces of B*T*D values per block; backward: two more (the f's),
//      in the activation dtype (TensorParallelConfig::activation_dtype)
//
//   embedding  vocab-parallel: rank r holds rows [r V/t, (r+1) V/t), ids elsewhere give
//              zeros, then an all_reduce of B*T*D
//   head       f after the final norm; logits [B*T, V/t] per rank (GPT's tied wte works
//              as is: its head uses the same vocab rows)
//   loss       vocab-parallel cross-entropy: full logits are never gathered
//              (vocab_parallel.h)
//
// Grouped-query attention with K kv heads: when t divides K each rank keeps K/t of them;
// when K divides t (K < t) each rank keeps the one kv head its N/t query heads use, and
// the t/K ranks sharing a kv head sum their partial gradients of its wqkv rows (one
// all_reduce of 2*K*H*D floats over tensor per layer in backward), so the copies agree.
// Layout::validate refuses every other case, and t not dividing N, d_ff or V.
//
// Initial weights: each rank fills its shard from the initialisers with the global
// element indices, so every layout starts from the model one process builds.
//
//   const AxisGroup& tp = mesh.axis("tensor");
//   auto shards = apply_tensor_parallel(model, tp, seed);   // before any other strategy
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "framework/nn/transformer.h"
#include "framework/precision.h"
#include "parallel/comm/step_plan.h"
#include "parallel/model_shards.h"

namespace shardlab::parallel {

// The shard of every split parameter of a model with `config` for rank `rank` of a
// tensor axis of size `t`, by parameter name; parameters not listed are replicated.
std::map<std::string, TensorShard> tensor_shards(const nn::ModelConfig& config, int t, int rank);

// What apply_tensor_parallel leaves behind: the shards of every rank, for checkpoints
// and the gradient norm (ModelShards).
class TensorParallel : public AxisShards {
 public:
  TensorParallel(nn::Transformer& model, const AxisGroup& tensor);
  // As AxisShards, except that a kv head several ranks hold is counted by the first of them.
  std::vector<std::pair<int64_t, int64_t>> norm_ranges(const std::string& name) const override;

 private:
  int64_t kv_share_;  // tensor ranks that hold each kv head: t / K when K < t, else 1
};

// Shards `model`'s parameters over `tensor` in place and installs the hooks above.
// Deferred parameters (nn::DeferParameters) are allocated as shards and filled from
// `seed`; allocated ones are cut from their values. Replicated parameters are left as
// they are. Call before the data-parallel strategy is built.
struct TensorParallelConfig {
  // Megatron's sequence parallelism: outside the tensor-parallel regions (norms, residual
  // adds) each rank keeps B/t of the microbatch's sequences; all_gather / reduce_scatter
  // replace the all_reduces, and the norm, position and row-parallel bias gradients are
  // summed over the axis. Needs t to divide the sequences of a microbatch.
  bool sequence_parallel = false;
  // The book's collective matmul (collective_matmul.h): with sequence parallelism, the
  // all_gather before attention's wqkv and GPT's MLP fc runs as ppermute steps that
  // overlap the matmul of the chunks already gathered.
  bool overlap = false;
  // What the stream's collectives carry, forward and backward (Megatron's f and g, sequence
  // parallelism's all_gathers and reduce_scatters, the collective matmul's ppermutes): fp32,
  // or bf16 -- half the bytes, every sum still taken in fp32 (collectives.h). A gather into
  // a region is read only by matmuls, which round their operands to bf16 under a bf16
  // policy anyway, so there bf16 changes no result; the sums (g's all_reduce, the
  // reduce_scatters, f's gradient all_reduce) round their partial sums to bf16 at each ring
  // hop, as Megatron's bf16 training does. parallelize() sets it to the precision policy's
  // activation dtype (--activation-dtype; the compute dtype by default). The loss's
  // statistics and the parameter gradients summed over the axis stay fp32.
  DType activation_dtype = DType::kF32;
};

std::unique_ptr<TensorParallel> apply_tensor_parallel(nn::Transformer& model, const AxisGroup& tensor, uint64_t seed,
                                                      const TensorParallelConfig& config = {});

// Rank `rank`'s shard of `model` on a tensor axis of size `t` without any hook or
// collective: parameters cut as apply_tensor_parallel cuts them (deferred ones filled
// from `seed`) and attention's head counts set. apply_tensor_parallel starts with it; on
// its own it is a stand-in for timing one rank's compute (parallel/runtime/compute_probe.h).
void shard_tensor_shapes(nn::Transformer& model, int t, int rank, uint64_t seed);

// Appends the collectives those hooks issue on the tensor axis in one training step of
// `microbatches` microbatches of `rows` sequences of `seq_len` tokens each, in issue
// order (step_plan.h); the gradient-norm all_reduce is the data-parallel strategy's.
void plan_tensor_parallel_step(StepPlan& plan, const Mesh& mesh, const nn::ModelConfig& config,
                               const TensorParallelConfig& tp, int64_t rows, int64_t seq_len, int microbatches);

}  // namespace shardlab::parallel
