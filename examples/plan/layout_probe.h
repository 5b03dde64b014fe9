// shardlab-plan train --cluster local --probe: each layout's compute timed on this
// machine as train_gpt's start-up probe times a run's (parallel/runtime/compute_probe.h),
// so that the ranking prices compute exactly as a run predicts its own step. One process
// per rank of the layout (`shardlab-plan probe-rank`, started afresh) times the stand-in
// of its shard (its tensor cut, microbatch rows, pipeline stage and context share) forward
// and backward under the run's precision and remat, all at once, sharing the cores as the
// ranks would; their mean, scaled to a rank's blocks and microbatches, plus the optimizer's
// pass and a pipeline's simulated schedule (parallel/runtime/compute_prediction.h), plus the
// slowest rank's lag (the skew a synchronised step waits for), is the compute.
// Communication stays the cost model's (parallel/cost/training/train_step.h,
// TrainConfig::cpu_step).
//
// A rank's shard is timed once per shape (layouts that differ only in ZeRO stage, sequence
// parallelism or schedule share it), in kRounds interleaved rounds over all the shapes a
// ranking needs, each a probe of its own (the median of seven passes), and the median kept:
// a machine's drift then hits every shape alike, as bench/planner_ranking.sh's rounds do
// the runs. About 2 s per 2-rank shape of gpt-bench on 2 cores.
//
//   auto probe = std::make_shared<LayoutProbe>(config, threads, bf16);
//   probe->time_shapes(layouts);   // optional: the rounds over every layout at once
//   config.measured_compute = [probe](const Layout& l) { return probe->compute_seconds(l); };
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "framework/nn/config.h"
#include "parallel/cost/training/train_step.h"
#include "parallel/runtime/compute_probe.h"

namespace shardlab::plan {

class LayoutProbe {
 public:
  // Throws UserError when shardlab's model cannot be built with the config's shape.
  LayoutProbe(const cost::TrainConfig& config, int threads, bool bf16);
  static constexpr int kRounds = 3;

  // Times the rank shapes of `layouts` not yet timed, in interleaved rounds.
  void time_shapes(const std::vector<cost::Layout>& layouts);
  // One rank's compute span of a step of `layout` (cost::TrainConfig::measured_compute);
  // its shape is timed first if it was not.
  double compute_seconds(const cost::Layout& layout);
  // "timed 4 rank shapes in 9.8 s".
  std::string summary() const;

 private:
  using Shape = std::tuple<int, int, int, int64_t, int>;  // tensor, pipe, context, microbatch rows, ranks
  runtime::RunConfig run_for(const cost::Layout& layout) const;
  Shape shape_of(const cost::Layout& layout) const;

  nn::ModelConfig model_;
  int64_t batch_ = 0, seq_len_ = 0;  // the global batch in sequences of seq_len_ tokens
  int threads_ = 1;
  bool bf16_ = false;
  std::map<Shape, runtime::ComputeProbe> probes_;
  double seconds_ = 0;  // spent probing
};

}  // namespace shardlab::plan
