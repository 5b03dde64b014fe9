// Watchdog: turns a hung collective into a prompt, named failure (DESIGN 6).
//
// While a rank waits for a collective it holds a Watchdog::Guard. If the wait lasts
// longer than the timeout, a background thread prints
//   rank 3: watchdog: all_reduce over axis 'tensor' (4096 bytes) not done after 5 s; ...
//   this rank had completed 1412 waits on collectives, the last an all_gather over 'data' ...
// and aborts every rank of the mesh. Arming and disarming are two atomic stores, so the
// guard costs nothing measurable on small messages. Timeout 0 switches it off.
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

namespace shardlab::parallel {

class Watchdog {
 public:
  static constexpr double kDefaultTimeoutSeconds = 300;

  // `abort_comm` (borrowed) is aborted on a timeout; `rank` names this rank in messages.
  Watchdog(MPI_Comm abort_comm, int rank, double timeout_seconds = kDefaultTimeoutSeconds);
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
  [[noreturn]] void fire(double waited_seconds) const;

  MPI_Comm abort_comm_;
  int rank_;
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
