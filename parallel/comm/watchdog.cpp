#include "parallel/comm/watchdog.h"
#include "parallel/comm/comm_context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace shardlab::parallel {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Watchdog::Watchdog(MPI_Comm abort_comm, int rank, double timeout_seconds)
    : abort_comm_(abort_comm), rank_(rank), timeout_seconds_(timeout_seconds), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::set_timeout(double seconds) {
  timeout_seconds_.store(std::max(0.0, seconds));
  wake_.notify_all();
}

Watchdog::Guard::Guard(Watchdog& watchdog, const std::string& axis, CollectiveOp op, int64_t bytes)
    : watchdog_(watchdog) {
  watchdog_.axis_ = &axis;
  watchdog_.op_ = op;
  watchdog_.bytes_ = bytes;
  watchdog_.armed_since_ns_.store(now_ns(), std::memory_order_release);
}

Watchdog::Guard::~Guard() {
  watchdog_.armed_since_ns_.store(0, std::memory_order_release);
  watchdog_.last_axis_.store(watchdog_.axis_, std::memory_order_relaxed);
  watchdog_.last_op_.store(static_cast<int>(watchdog_.op_), std::memory_order_relaxed);
  watchdog_.last_bytes_.store(watchdog_.bytes_, std::memory_order_relaxed);
  watchdog_.completed_.fetch_add(1, std::memory_order_release);
}

void Watchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    const double timeout = timeout_seconds_.load();
    // Check a few times per timeout so a hang is reported within ~1.25x the timeout.
    const double period = timeout > 0 ? std::min(timeout / 4, 1.0) : 1.0;
    wake_.wait_for(lock, std::chrono::duration<double>(period));
    const int64_t since = armed_since_ns_.load(std::memory_order_acquire);
    if (stop_ || timeout <= 0 || since == 0) continue;
    const double waited = (now_ns() - since) * 1e-9;
    if (waited > timeout) fire(waited);
  }
}

void Watchdog::fire(double waited_seconds) const {
  std::fprintf(stderr,
               "rank %d: watchdog: %s over axis '%s' (%lld bytes) not done after %.1f s (timeout %.1f s); "
               "some rank of the axis is missing from this collective or called a different one\n",
               rank_, to_string(op_).c_str(), axis_->c_str(), static_cast<long long>(bytes_), waited_seconds,
               timeout_seconds_.load());
  const int64_t completed = completed_.load(std::memory_order_acquire);
  const std::string* last = last_axis_.load(std::memory_order_relaxed);
  std::fprintf(stderr, "rank %d: watchdog: this rank had completed %lld waits on collectives before it", rank_,
               static_cast<long long>(completed));
  if (last) {
    std::fprintf(stderr, ", the last a %s over '%s' (%lld bytes)",
                 to_string(static_cast<CollectiveOp>(last_op_.load(std::memory_order_relaxed))).c_str(),
                 last->c_str(), static_cast<long long>(last_bytes_.load(std::memory_order_relaxed)));
  }
  std::fprintf(stderr, "; a rank that reports fewer fell behind (set the timeout with --collective-timeout)\n");
  std::fflush(stderr);
  // Called from the watchdog thread while the main thread is stuck inside MPI: the job is
  // lost either way, and MPI_Abort is the one call that ends every rank.
  MPI_Abort(abort_comm_, 1);
  std::abort();
}

}  // namespace shardlab::parallel
