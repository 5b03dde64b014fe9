// StepGuard: what every rank agrees on at each step boundary, before the update -- whether
// the step's loss and gradient norm are finite on every rank, and whether any rank has been
// asked to stop (preemption.h). One all_reduce (max) of three floats over the whole mesh,
// so every rank takes the same decision (docs/reliability.md measures its cost).
//
// A non-finite loss or gradient norm (a diverged run): under --on-nonfinite stop the run
// ends at that step without applying its update; under skip the update is dropped and
// training goes on, at most --max-skips steps in a row, then it stops too. A stop throws
// the same UserError on every rank, naming the step and the last good checkpoint.
//
// For tests only: SHARDLAB_FAULT_NONFINITE="R:S1,S2,..." makes rank R's loss NaN at steps
// S1, S2, ... (tests/fault_nonfinite.sh), a divergence at a chosen step and rank.
//
//   StepGuard guard(mesh, run, signals);
//   train_step(..., [&](const StepResult& r) { return guard.agree(step + 1, r.loss, r.grad_norm); });
//   guard.stop_if_diverged(last_checkpoint);     // the weights are still those of the last good step
//   if (guard.preempted()) { save; return kPreemptedExitCode; }
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "parallel/comm/mesh.h"
#include "parallel/runtime/preemption.h"
#include "parallel/runtime/run_config.h"

namespace shardlab::runtime {

class StepGuard {
 public:
  StepGuard(const parallel::Mesh& mesh, const RunConfig& run, const PreemptionSignals& signals);

  // Collective over the mesh, for train_step's before_update: true to apply the update of
  // `step` (counted from 1), whose local loss and global gradient norm are given.
  bool agree(int64_t step, double loss, double grad_norm);

  bool preempted() const { return preempted_; }  // some rank caught a signal (by the last agree)
  std::string preempted_by() const;              // "SIGTERM" (this rank's), or "a signal on another rank"
  bool skipped() const { return skipped_; }      // the last step's update was dropped

  // After the step is logged: when the last step diverged and the policy says stop, throws
  // the same UserError on every rank naming the step and `last_checkpoint` ("" for none).
  void stop_if_diverged(const std::string& last_checkpoint) const;

 private:
  const parallel::Mesh& mesh_;
  const PreemptionSignals& signals_;
  bool skip_;          // --on-nonfinite skip
  int64_t max_skips_;  // in a row
  std::set<int64_t> injected_;  // steps whose loss is NaN here (SHARDLAB_FAULT_NONFINITE)
  int64_t step_ = 0, skips_in_a_row_ = 0;
  bool loss_bad_ = false, norm_bad_ = false, skipped_ = false, stop_ = false, preempted_ = false;
};

}  // namespace shardlab::runtime
