// Watchdog: turns a hung collective into a prompt, named failure (docs/reliability.md).
//
// While a rank waits for a collective it holds a Watchdog::Guard. If the wait lasts
// longer than the timeout, a background thread asks every rank of the mesh where it is
// (the watchdog threads answer each other over a communicator of their own, so a rank
// stuck inside MPI still answers), waits a grace period for the answers, prints
//   rank 0: watchdog: all_reduce over axis 'tensor' (4096 bytes) not done after 5 s; ...
//   rank 0: watchdog: missing: rank 3 did not answer (stopped, dead or cut off; ...)
//   rank 0: watchdog:   rank 1: waits in all_reduce over 'tensor' (4096 bytes) for 5.2 s,
//                       after 1412 completed collectives, the last an all_gather over 'data' ...
// (rank_status.h) and aborts every rank of the mesh. Arming and disarming are two atomic
// stores, so the guard costs nothing measurable on small messages. Timeout 0 switches
// the timeout off (the thread still answers other ranks). The exchange needs
// MPI_THREAD_MULTIPLE (MpiRuntime asks for it); without it the report is this rank's alone.
//
//   Watchdog::Guard guard(context.watchdog, group.name(), CollectiveOp::kAllReduce, bytes);
//   MPI_Wait(...);
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "parallel/comm/collective_types.h"
#include "parallel/comm/rank_status.h"

namespace shardlab::parallel {

// --collective-timeout as every program takes it: seconds, or 0 for `automatic`; a
// negative value is a UserError naming the flag.
double collective_timeout_from_flag(double seconds, double automatic = 300);

class Watchdog {
 public:
  static constexpr double kDefaultTimeoutSeconds = 300;

  // `comm` (borrowed) is aborted on a timeout, and its ranks asked where they are;
  // `rank` is this rank's in it. Collective over `comm` (it is duplicated).
  Watchdog(MPI_Comm comm, int rank, double timeout_seconds = kDefaultTimeoutSeconds);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void set_timeout(double seconds);
  double timeout() const { return timeout_seconds_.load(); }

  // Armed for its lifetime. `axis` must outlive the guard (it is a group's name).
  class Guard {
   public:
    Guard(Watchdog& watchdog, const std::string& axis, CollectiveOp op, int64_t bytes);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Watchdog& watchdog_;
  };

 private:
  void run();
  [[noreturn]] void fire(double waited_seconds);
  RankStatus status() const;  // this rank's, now
  // Answers another rank's question, if one has arrived (watchdog thread only).
  void answer_questions();

  MPI_Comm abort_comm_;
  int rank_;
  MPI_Comm status_comm_ = MPI_COMM_NULL;  // the watchdogs' own; null without MPI_THREAD_MULTIPLE
  MPI_Request question_ = MPI_REQUEST_NULL;
  int question_buffer_ = 0;
  std::atomic<double> timeout_seconds_;
  // What is being waited for; written before armed_since_ns_ is published.
  const std::string* axis_ = nullptr;
  CollectiveOp op_ = CollectiveOp::kAllReduce;
  int64_t bytes_ = 0;
  std::atomic<int64_t> armed_since_ns_{0};  // 0: not waiting
  // The collectives this rank has finished waiting for, and the last of them: ranks that
  // hang report them, so comparing their counts shows who fell behind.
  std::atomic<int64_t> completed_{0};
  std::atomic<const std::string*> last_axis_{nullptr};
  std::atomic<int> last_op_{0};
  std::atomic<int64_t> last_bytes_{0};

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace shardlab::parallel
