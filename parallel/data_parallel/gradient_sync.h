// GradientSync: what a data-parallel strategy is to the facade (parallel/parallel_model.h)
// -- a reducer of gradients over the data axes and a sharded store of the parameters,
// gradients and optimizer state that its ZeRO stage gives this rank. One per layout:
//
//   stage 0 (DP)     replicated everything; gradients all-reduced in buckets launched
//                    from backward hooks as each bucket fills, overlapping backward
//                    (data_parallel.h)
//   stage 1          + optimizer state sharded: all-reduce, update own slice, all-gather
//                    params (zero.h)
//   stage 2          + gradients sharded: reduce-scatter, update own slice, all-gather
//                    params (zero.h)
//   stage 3 (FSDP)   + parameters sharded: each block gathered just before its forward
//                    and again before its backward, gradients reduce-scattered per block,
//                    the next block prefetched (fsdp/fsdp.h)
//
// The data axes are `data` and `fsdp` (whichever the mesh has), and `expert`, which
// splits the batch too: dense gradients are averaged over all three, expert-parallel
// experts' over data and fsdp alone (expert/expert_parallel.h). Stages 1-3 shard over
// `fsdp` when it is larger than 1 and replicate over `data` (hybrid sharding), else shard
// over `data`. Gradients are averaged over all data ranks, so with each rank computing
// the mean loss of its equal slice of the global batch, every layout optimises the loss
// of the whole batch, as the single process does.
//
// A strategy only reduces and stores (Flashlight's Reducer: gradients are added by
// backward hooks, finish_gradients() finalises). The optimizer is built outside it, over
// local_parameters(); clipping's global norm, the no-sync scope and checkpoint files
// belong to the facade.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "framework/checkpoint.h"
#include "framework/precision.h"
#include "optim/optimizer.h"
#include "parallel/comm/mesh.h"
#include "parallel/model_shards.h"

namespace shardlab::parallel {

// The user's choice of data parallelism (--zero, --bucket-mb, --no-overlap, ...).
struct DataParallelConfig {
  int zero = 0;                 // ZeRO stage 0-3
  double bucket_mb = 4.0;       // gradient bucket size (stages 0-2)
  bool overlap = true;          // launch bucket reductions from backward hooks (else all at the end);
                                // stage 3 also prefetches the next unit's gather
  bool reshard_after_forward = true;  // stage 3: free a block's gathered parameters after its
                                      // forward (false: keep them until its backward, no regather)
  uint64_t seed = 0;            // initialises parameters the model left unallocated (nn::DeferParameters)
  DType reduce_dtype = DType::kF32;  // what gradient reductions carry (sums in fp32); parallelize()
                                     // sets it to the precision policy's reduce dtype
  DType param_dtype = DType::kF32;  // what parameter all_gathers carry (ZeRO-1/2 after the update,
                                    // ZeRO-3 before each block); parallelize() sets it to the
                                    // precision policy's compute dtype
};

// What the model-parallel strategies parallelize() applied first did to the parameters,
// as the data-parallel strategy beneath them needs to know it.
struct ModelSplit {
  // How tensor, expert and pipeline parallelism split the parameters: checkpoint I/O goes
  // through it (model_shards.h). nullptr: every parameter is global.
  std::shared_ptr<const ModelShards> shards = nullptr;
  // The parameters each rank of the expert axis holds its own part of (the experts),
  // averaged over DataAxes::expert_data only.
  std::set<std::string> expert_parameters = {};
};

// The groups a data-parallel strategy communicates over. The context axis is data
// parallelism over the positions of each sequence (parallel/context): its ranks hold the
// same parameters and average their gradients like data ranks, but share the batch's rows.
struct DataAxes {
  const AxisGroup* batch = nullptr;    // every rank with its own rows of the batch (data, fsdp,
                                       // expert): the loader's split
  const AxisGroup* all = nullptr;      // batch and context: every rank with its own tokens,
                                       // dense gradient averaging, the logged loss
  const AxisGroup* expert_data = nullptr;  // data, fsdp and context: the ranks holding the same experts
  const AxisGroup* shard = nullptr;    // where ZeRO shards live
  const AxisGroup* replica = nullptr;  // across shard groups (hybrid: data and context), or nullptr
  const AxisGroup* dense_replica = nullptr;  // replica and expert: where a dense parameter's
                                             // shard has copies (nullptr: none)
  static DataAxes of(const Mesh& mesh);
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // Whether the backward passes that follow communicate (the facade's no_sync() turns it
  // off for accumulation microbatches and for a pipeline's schedule): the gradients they
  // leave accumulate locally, and finish_gradients() reduces what they did not.
  virtual void set_sync(bool sync) = 0;
  // Before each microbatch's forward (stage 3 gathers the root unit it keeps until backward).
  virtual void begin_microbatch() {}
  // Waits for outstanding reductions; the gradients are then the mean over data ranks.
  virtual void finish_gradients() = 0;
  // What this rank's optimizer updates: its parameter elements, each with its averaged
  // gradient once finish_gradients() has returned (empty before), and whether this rank
  // counts it in the gradient norm. The same views, in the same order, every step.
  virtual optim::ParamViews local_parameters() = 0;
  // Where this rank's counted gradients are sharded over the data axes (their squared
  // norms add up over it), or nullptr where they are replicated.
  virtual const AxisGroup* gradient_shard_group() const = 0;
  // After the optimizer has updated local_parameters(): stages 1-2 all_gather every
  // rank's updated slices, so that each holds the whole model again.
  virtual void finish_step() {}
  virtual void zero_grad() = 0;

  // Puts the full parameters into the model's tensors (for evaluation and decoding) until
  // release_full_params(); no-ops where parameters are replicated.
  virtual void gather_full_params() {}
  virtual void release_full_params() {}

  // The sharded store. Collective: writes params/<name> and the optimizer's state as
  // optim/<kind>/<name>, unsharded, gathering one group at a time; only the rank holding a
  // writer writes. `optimizer` is the one built over local_parameters().
  virtual void save(CheckpointSink* writer, const optim::Optimizer& optimizer) = 0;
  // Each rank reads only what it owns: its parameters and its views' optimizer state.
  virtual void load(const CheckpointReader& reader, const optim::Optimizer& optimizer) = 0;
  virtual std::string describe() const = 0;

  // Seconds this rank has spent blocked on the strategy's communication since it was
  // made: the exposed part, not hidden behind compute.
  double exposed_comm_seconds() const { return exposed_seconds_; }

 protected:
  void add_exposed_seconds(double seconds) { exposed_seconds_ += seconds; }
  // Runs a blocking communication call and counts its time as exposed.
  template <typename Fn>
  void blocking(Fn fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    exposed_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  double exposed_seconds_ = 0;
};

}  // namespace shardlab::parallel
