// Context parallelism (the book's sequence sharding for long context; Megatron-LM's
// context_parallel_size, torchtitan's context_parallel_degree): the `context` axis gives
// each of its c ranks a slice of every sequence through the whole model -- embeddings,
// norms, MLP and loss see only their T/c positions; attention alone needs the others.
//
//   positions  head-tail balance (default): a sequence cut in 2c chunks, rank r holds
//              chunks r and 2c-1-r, so every rank has the same share of the causal mask's
//              work; without it, chunk r of c. RoPE and the learned positions use the
//              rows' global positions.
//   ring       (--cp-comm ring) c steps per attention: compute on the key/value block in
//              hand while ppermute passes it on, merging partial results with the online
//              softmax (ops/block_attention.h). Backward passes the blocks round again
//              with their key/value gradients, which arrive home after c steps.
//              Per layer: (c-1) K/V blocks forward, (c-1) K/V plus c dK/dV blocks backward.
//   allgather  (--cp-comm allgather, LLaMA 3's choice, cheap with grouped-query
//              attention): all_gather the K/V blocks, attend once; backward
//              reduce_scatters the key/value gradients.
//
// An MoE block routes each rank's tokens (dropless: a capacity counts a whole sequence's
// tokens in order, which no rank holds) and averages its load-balancing shares over the
// axis, so the loss is the whole sequence's.
//
// Parameters are replicated over the axis, like a data axis: gradients are averaged over
// data x fsdp x context, and ZeRO shards over the same ranks (DataAxes). The loader splits
// rows over the data axes only; parallelize's facade slices each row's positions.
//
//   auto context = apply_context_parallel(model, mesh.axis("context"), {.comm = ContextComm::kRing});
//   data::Batch mine = context->slice(batch);        // this rank's positions of every row
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/nn/transformer.h"
#include "framework/ops/block_attention.h"
#include "framework/precision.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"
#include "parallel/spec/context_comm.h"

namespace shardlab::parallel {

struct ContextParallelConfig {
  ContextComm comm = ContextComm::kRing;
  bool load_balance = true;  // head-tail chunks
  // What K/V blocks travel as; parallelize() sets the precision policy's compute dtype.
  // bf16 halves their bytes and loses nothing: the matmuls read them in bf16 anyway.
  // Their gradients travel in fp32, as sums.
  DType kv_dtype = DType::kF32;
};

// How each sequence is cut over a context axis of `size` ranks.
struct SequenceSplit {
  int size = 1;
  bool load_balance = true;

  int chunks() const { return load_balance ? 2 * size : size; }  // the sequence length must be a multiple
  // UserError, naming the values and the fix, unless seq_len cuts into chunks().
  void check_length(int64_t seq_len) const;
  // The chunks rank `rank` holds, in the order of its rows.
  std::vector<int> chunks_of(int rank) const;
  // Rank `rank`'s rows of each sequence (`local` of them) as runs of positions.
  std::vector<ops::PositionSpan> spans(int rank, int64_t local) const;
  std::vector<int64_t> positions(int rank, int64_t local) const;
  // Rank `rank`'s positions of every row of `batch`, which holds whole sequences.
  data::Batch slice(const data::Batch& batch, int rank) const;
};

// Where this rank's attention time went, summed over every call since the start: its own
// block computations, and the time it waited for key/value blocks and their gradients
// (what the computation did not hide).
struct ContextTimes {
  double compute_seconds = 0;
  double exposed_comm_seconds = 0;
};

// Causal attention of this rank's rows qkv[B, T/c, (N + 2K) * H] (its positions under
// `split`) to the keys of the whole sequence over `context`, by config.comm with K/V in
// config.kv_dtype: the op the model's hooks run (config.load_balance is the split's). Differentiable; collective over the axis in forward and in backward.
// `times`, where given, accumulates the forward's and the backward's times.
Tensor context_attention(const AxisGroup& context, const SequenceSplit& split, const ContextParallelConfig& config,
                         const Tensor& qkv, int n_heads, int n_kv_heads, std::shared_ptr<ContextTimes> times = nullptr);

// What apply_context_parallel installed: the model's hooks, which evaluation and decoding
// take off while they run whole sequences on every rank.
class ContextParallel {
 public:
  ContextParallel(nn::Transformer& model, const AxisGroup& context, const ContextParallelConfig& config);
  const SequenceSplit& split() const { return split_; }
  const ContextParallelConfig& config() const { return config_; }
  data::Batch slice(const data::Batch& batch) const { return split_.slice(batch, context_.rank()); }
  const ContextTimes& times() const { return *times_; }
  // Hooks off (every rank runs whole sequences) until attach().
  void detach() const;
  void attach() const;

 private:
  nn::Transformer& model_;
  const AxisGroup& context_;
  ContextParallelConfig config_;
  SequenceSplit split_;
  std::shared_ptr<const nn::ContextParallelHooks> hooks_;
  std::shared_ptr<ContextTimes> times_ = std::make_shared<ContextTimes>();
};

// Installs context parallelism on `model` over `context` (a single axis).
std::unique_ptr<ContextParallel> apply_context_parallel(nn::Transformer& model, const AxisGroup& context,
                                                        const ContextParallelConfig& config);

// The axis's collectives in one training step (step_plan.h): per attention layer and
// microbatch, as described above, and an MoE layer's all_reduce of its load-balancing
// shares (rows x E floats); a rematerialised layer's forward again in backward. `layers`
// are the blocks this rank runs, in order.
void plan_context_parallel_step(StepPlan& plan, const Mesh& mesh, const nn::ModelConfig& config,
                                const ContextParallelConfig& cp, int64_t rows, int64_t seq_len, int microbatches,
                                const std::vector<int64_t>& layers);

}  // namespace shardlab::parallel
