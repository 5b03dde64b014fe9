// Preemption: a job asked to stop (Slurm at a time limit or preemption, a user's Ctrl-C)
// finishes the step in hand, saves a checkpoint and exits with kPreemptedExitCode, so that
// a requeued job resumes with `--resume latest` where this one stopped (docs/reliability.md).
//
// PreemptionSignals catches SIGTERM, SIGINT and SIGUSR1 (mpirun forwards SIGUSR1 to every
// rank; Slurm sends SIGTERM to every process of the step). The handler only records the
// signal (async-signal-safe) and restores the default action of all three, so a second
// signal ends the process at once. The ranks agree at the step boundary (StepGuard,
// step_guard.h): a signal seen by any rank stops all of them after the same step.
//
//   PreemptionSignals signals;        // for the whole run; restores the old handlers after
//   ... if (signals.received()) ...   // e.g. SIGTERM, 0 while none came
#pragma once

namespace shardlab::runtime {

// 128 + SIGTERM: what a process ended by SIGTERM reports, so schedulers and wrappers that
// treat 143 as "terminated on request" (Kubernetes, torchelastic, Slurm scripts) already
// handle it; here it means a checkpoint of the last step is on disk. launch/slurm.sbatch
// requeues the job on it.
inline constexpr int kPreemptedExitCode = 143;

class PreemptionSignals {
 public:
  PreemptionSignals();   // installs the handlers (one object at a time)
  ~PreemptionSignals();  // restores the handlers found
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

  // The first signal caught (SIGTERM, SIGINT or SIGUSR1), 0 while none has come.
  int received() const;
};

// "SIGTERM", "SIGINT", "SIGUSR1", else "a signal".
const char* signal_name(int signal);

}  // namespace shardlab::runtime
