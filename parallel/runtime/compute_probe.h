// One rank's compute, measured at start-up piece by piece, for the step prediction.
//
// A FLOP count at a GEMM rate misses what a CPU step spends outside matmuls (norms,
// softmax, the MLP activation, MoE routing and its dispatch copies) and what ranks
// sharing cores lose to each other. So before the first step every rank times a stand-in
// of its own shard: the same model cut to one "period" of blocks (a period is moe_every
// blocks, one of them MoE; one block for a dense model) and to K periods -- as many as the
// rank's pipeline stage holds, between 2 and 4 -- its matrices cut as the
// tensor axis cuts them (parallel::shard_tensor_shapes, no collectives), on about 512
// tokens of whole sequences of this rank's microbatch (scaled to all its rows), forward and backward,
// under the run's remat policy: the median of seven passes each, the two alternating. The
// difference of the two is K - 1 periods; the rest is the embedding, the head and the
// loss. A stage of K periods is then timed whole, and a deeper one is extrapolated from a
// difference K - 1 periods wide, not one (its noise divided by K - 1).
// A rank of a context axis of c holds T/c positions of each row and (head-tail balanced) a
// 1/c share of the causal attention, computed by the block kernels of parallel/context:
// its stand-in runs whole rows through those kernels, a key block per chunk of the split,
// and keeps 1/c of the time.
// All ranks probe at once, as they will train (sharing cores if they do), and the mean is
// kept -- and how much longer the slowest rank's probe took than the mean: a step whose
// ranks synchronise (every parallel step does, at least once) runs at the slowest rank's
// pace, and on a shared machine some core is slower than the others. Two to three seconds
// for gpt-bench on one core.
//
// What the probe leaves to the prediction: the number of blocks and microbatches, the
// pipeline schedule, the optimizer (at the calibrated memory bandwidth) and all
// communication (the layout's plan on the mesh's links).
//
//   const ComputeProbe probe = probe_compute(run, mesh);   // collective
//   double per_microbatch = probe.period_seconds * periods + probe.head_seconds;
#pragma once

#include <string>
#include <vector>

#include "parallel/runtime/run_config.h"
#include "parallel/comm/mesh.h"

namespace shardlab::runtime {

struct ComputeProbe {
  int64_t period_blocks = 1;   // blocks per period (moe_every for an MoE model, else 1)
  double period_seconds = 0;   // forward + backward of one period on one microbatch
  double head_seconds = 0;     // embedding, final norm, logits and loss, forward + backward
  double rank_skew = 0;        // the slowest rank's probe time over the ranks' mean, minus 1
  // Threads of this node's ranks per core (1 when each has cores of its own): the probe
  // ran at this sharing; a rank that idles (a pipeline bubble) lends its core to another.
  double core_sharing = 1;
  std::string describe() const;  // "block 12.3 ms + head 2.1 ms per microbatch"
};

// Collective over the mesh: every rank times its stand-in; the ranks average it and
// measure their skew and how many threads share each core of a node.
ComputeProbe probe_compute(const RunConfig& run, const parallel::Mesh& mesh);

// The pieces of probe_compute for a caller without a mesh (the planner's --probe,
// examples/plan/layout_probe.h, which runs one process per rank of `layout` at once):
// one rank's stand-ins of `layout` timed on this process (the period's and the head's time
// per microbatch, scaled to the rank's rows, and the whole probe's), and the ranks'
// timings combined as probe_compute combines them (means, skew).
struct RankTiming {
  int64_t period_blocks = 1;
  double period_seconds = 0, head_seconds = 0, total_seconds = 0;
};
RankTiming time_rank_compute(const RunConfig& run, const parallel::Layout& layout);
ComputeProbe combine_rank_timings(const std::vector<RankTiming>& ranks, double core_sharing);

// The layout a rank of `mesh` trains under `run`, as the cost model takes it: the mesh's
// degrees with the run's microbatches and choices (RunConfig::layout), ZeRO-3 as an fsdp
// axis (a data axis under --zero 3 becomes one).
parallel::Layout mesh_layout(const RunConfig& run, const parallel::Mesh& mesh);

}  // namespace shardlab::runtime
