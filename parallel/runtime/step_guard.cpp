#include "parallel/runtime/step_guard.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "framework/error.h"
#include "parallel/comm/collectives.h"

namespace shardlab::runtime {

namespace {

// The steps SHARDLAB_FAULT_NONFINITE ("R:S1,S2,...") names for rank `rank`.
std::set<int64_t> injected_steps(int rank) {
  const char* spec = std::getenv("SHARDLAB_FAULT_NONFINITE");
  std::set<int64_t> steps;
  if (!spec || std::atoi(spec) != rank || !std::strchr(spec, ':')) return steps;
  for (const char* at = std::strchr(spec, ':'); at; at = std::strchr(at + 1, ',')) steps.insert(std::atoll(at + 1));
  return steps;
}

}  // namespace

StepGuard::StepGuard(const parallel::Mesh& mesh, const RunConfig& run, const PreemptionSignals& signals)
    : mesh_(mesh),
      signals_(signals),
      skip_(run.on_nonfinite == "skip"),
      max_skips_(run.max_skips),
      injected_(injected_steps(mesh.rank())) {}

bool StepGuard::agree(int64_t step, double loss, double grad_norm) {
  if (injected_.count(step)) loss = std::nan("");
  // The loss is this rank's (its tokens); the norm is global but checked everywhere anyway:
  // a max over every rank is the one decision they all take.
  float flags[3] = {std::isfinite(loss) ? 0.0f : 1.0f, std::isfinite(grad_norm) ? 0.0f : 1.0f,
                    signals_.received() != 0 ? 1.0f : 0.0f};
  parallel::all_reduce(mesh_.all(), flags, parallel::ReduceOp::kMax);
  step_ = step;
  loss_bad_ = flags[0] > 0, norm_bad_ = flags[1] > 0, preempted_ = flags[2] > 0;
  const bool finite = !loss_bad_ && !norm_bad_;
  skips_in_a_row_ = finite ? 0 : skips_in_a_row_ + 1;
  stop_ = !finite && (!skip_ || skips_in_a_row_ > max_skips_);
  skipped_ = !finite;  // stopped or skipped, the update is not applied
  if (skipped_ && !stop_ && mesh_.rank() == 0) {
    std::printf("step %lld: non-finite %s; its update is skipped (--on-nonfinite skip, %lld of at most %lld in a "
                "row)\n", static_cast<long long>(step), loss_bad_ && norm_bad_ ? "loss and gradient norm"
                                                       : loss_bad_ ? "loss" : "gradient norm",
                static_cast<long long>(skips_in_a_row_), static_cast<long long>(max_skips_));
    std::fflush(stdout);
  }
  return finite;
}

std::string StepGuard::preempted_by() const {
  const int mine = signals_.received();
  return mine != 0 ? signal_name(mine) : "a signal on another rank";
}

void StepGuard::stop_if_diverged(const std::string& last_checkpoint) const {
  if (!stop_) return;
  const std::string what = loss_bad_ && norm_bad_ ? "the loss and the gradient norm are"
                           : loss_bad_             ? "the loss is"
                                                   : "the gradient norm is";
  const std::string why = skip_ ? "for " + std::to_string(skips_in_a_row_) + " steps in a row, more than --max-skips " +
                                      std::to_string(max_skips_)
                                : "(--on-nonfinite stop)";
  const std::string resume = last_checkpoint.empty()
                                 ? "no checkpoint was written before it; start again"
                                 : "the last good checkpoint is " + last_checkpoint + "; resume from it (--resume " +
                                       last_checkpoint + ")";
  throw UserError("step " + std::to_string(step_) + ": " + what + " non-finite (the run diverged) " + why +
                  "; stopped without applying the update, and wrote no checkpoint of it; " + resume +
                  " with a lower --lr or a longer --warmup, or pass --on-nonfinite skip to drop such steps");
}

}  // namespace shardlab::runtime
