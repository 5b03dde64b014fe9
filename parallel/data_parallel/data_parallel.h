// Data parallelism with ZeRO stages 0-3: how gradients are synchronised over the data
// axes and which of parameters, gradients and optimizer state are sharded there.
//
//   stage 0 (DP)     replicated everything; gradients all-reduced in buckets launched
//                    from backward hooks as each bucket fills, overlapping backward
//   stage 1          + optimizer state sharded: all-reduce, update own slice, all-gather params
//   stage 2          + gradients sharded: reduce-scatter, update own slice, all-gather params
//   stage 3 (FSDP)   + parameters sharded (fsdp/fsdp.h): each block gathered just
//                    before its forward and again before its backward, gradients
//                    reduce-scattered per block, the next block prefetched
//
// The data axes are `data` and `fsdp` (whichever the mesh has), and `expert`, which
// splits the batch too: dense gradients are averaged over all three, expert-parallel
// experts' over data and fsdp alone (expert/expert_parallel.h). Stages 1-3 shard over
// `fsdp` when it is larger than 1 and replicate over `data` (hybrid sharding), else shard
// over `data`. Gradients are averaged over all data ranks, so with each rank computing
// the mean loss of its equal slice of the global batch, every layout optimises the loss
// of the whole batch, as the single process does.
//
// The strategy reduces and stores; the optimizer is built outside it, over the parameter
// views this rank updates (optim/optimizer.h): whole parameters at stage 0, this rank's
// slice of every bucket or unit at stages 1-3. A training step, for k microbatches:
//   optim::AdamW opt(dp->parameters(), {.weight_decay = 0.1f});   // once
//   for (int i = 0; i < k; ++i) { dp->begin_microbatch(i, k); loss(micro i).backward(); }
//   dp->finish_gradients();                 // waits for the last reductions
//   optim::clip_grad_norm(opt.views(), 1.0, dp->norm_reduction());
//   opt.step(lr);
//   dp->finish_step();                      // stages 1-2: all_gather the updated slices
//   dp->zero_grad();
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "framework/checkpoint.h"
#include "framework/nn/transformer.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"
#include "parallel/model_shards.h"

namespace shardlab::parallel {

struct DataParallelConfig {
  int zero = 0;                 // ZeRO stage 0-3
  double bucket_mb = 4.0;       // gradient bucket size (stages 0-2)
  bool overlap = true;          // launch bucket reductions from backward hooks (else all at the end);
                                // stage 3 also prefetches the next unit's gather
  bool reshard_after_forward = true;  // stage 3: free a block's gathered parameters after its
                                      // forward (false: keep them until its backward, no regather)
  uint64_t seed = 0;            // initialises parameters the model left unallocated (nn::DeferParameters)
  // Set by parallelize() when a model-parallel strategy split the parameters first: the
  // checkpoint I/O and gradient norm then go through it (model_shards.h).
  std::shared_ptr<const ModelShards> model_shards = nullptr;
  // Set by parallelize() under expert parallelism: the parameters each rank of the
  // expert axis holds its own part of (the experts), averaged over expert_data only.
  std::set<std::string> expert_parameters = {};
};

// The groups a data-parallel strategy communicates over.
struct DataAxes {
  const AxisGroup* all = nullptr;      // every rank with its own rows of the batch (data, fsdp,
                                       // expert): the loader's split, dense gradient averaging
  const AxisGroup* expert_data = nullptr;  // data and fsdp: the ranks holding the same experts
  const AxisGroup* shard = nullptr;    // where ZeRO shards live
  const AxisGroup* replica = nullptr;  // across shard groups (hybrid), or nullptr
  const AxisGroup* dense_replica = nullptr;  // replica and expert: where a dense parameter's
                                             // shard has copies (nullptr: none)
  static DataAxes of(const Mesh& mesh);
};

class DataParallel {
 public:
  virtual ~DataParallel() = default;
  // Before the forward of microbatch `index` of `count`: gradients are communicated only
  // during the backward of the last one (a no-sync scope for the others).
  virtual void begin_microbatch(int index, int count) = 0;
  // Waits for outstanding reductions; the gradients are then the mean over data ranks.
  virtual void finish_gradients() = 0;
  // What this rank's optimizer updates: its parameter elements, each with its averaged
  // gradient once finish_gradients() has returned (empty before), and whether this rank
  // counts it in the gradient norm. The same views, in the same order, every step.
  virtual optim::ParamViews local_parameters() = 0;
  // The global sum of squared gradients from this rank's counted part: summed over the
  // ranks that shard the gradients and over the model-parallel group. Collective.
  virtual double reduce_squared_norm(double local) = 0;
  // After the optimizer has updated local_parameters(): stages 1-2 all_gather every
  // rank's updated slices, so that each holds the whole model again.
  virtual void finish_step() {}
  virtual void zero_grad() = 0;

  // The optimizer's source (optim::ParamSource) and optim::clip_grad_norm's reduction
  // (counted as exposed communication).
  optim::ParamSource parameters() {
    return [this] { return local_parameters(); };
  }
  optim::SquaredNormReduce norm_reduction() {
    return [this](double local) {
      double global = 0.0;
      blocking([&] { global = reduce_squared_norm(local); });
      return global;
    };
  }

  // Puts the full parameters into the model's tensors (for evaluation and decoding) until
  // release_full_params(); no-ops where parameters are replicated.
  virtual void gather_full_params() {}
  virtual void release_full_params() {}
  // Collective. Writes params/<name> and the optimizer's state as optim/<kind>/<name>,
  // unsharded, gathering one group at a time; only the rank holding a writer (rank 0 of
  // the mesh) writes. `optimizer` is the one built over parameters().
  virtual void save(CheckpointWriter* writer, const optim::Optimizer& optimizer) = 0;
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

// Stages 0-2: parameters whole on every rank, gradients reduced in buckets
// (gradient_buckets.h) -- stage 0 here, stages 1 and 2 in zero.h. Parameters
// built under nn::DeferParameters are allocated and initialised in full from config.seed.
// Stage 3 is fsdp/fsdp.h; parallel/parallelize.h chooses between them.
std::unique_ptr<DataParallel> make_bucketed_data_parallel(nn::Transformer& model, const Mesh& mesh,
                                                          const DataParallelConfig& config);

// The collectives that strategy issues in one training step, in issue order
// (step_plan.h), from the parameter shapes alone: the model may be deferred and stays so.
StepPlan plan_bucketed_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config);

}  // namespace shardlab::parallel
