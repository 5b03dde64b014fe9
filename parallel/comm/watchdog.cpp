#include "parallel/comm/watchdog.h"
#include "parallel/comm/comm_context.h"
#include "framework/error.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

namespace shardlab::parallel {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

double collective_timeout_from_flag(double seconds, double automatic) {
  if (!(seconds >= 0)) {
    throw UserError("--collective-timeout must be 0 (automatic) or a number of seconds, got " + std::to_string(seconds));
  }
  return seconds > 0 ? seconds : automatic;
}

// Tags on the watchdogs' communicator.
constexpr int kQuestionTag = 1;
constexpr int kAnswerTag = 2;

Watchdog::Watchdog(MPI_Comm comm, int rank, double timeout_seconds)
    : abort_comm_(comm), rank_(rank), timeout_seconds_(timeout_seconds) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level == MPI_THREAD_MULTIPLE) {
    MPI_Comm_dup(comm, &status_comm_);
    MPI_Irecv(&question_buffer_, 1, MPI_INT, MPI_ANY_SOURCE, kQuestionTag, status_comm_, &question_);
  }
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (status_comm_ != MPI_COMM_NULL) {
    MPI_Cancel(&question_);
    MPI_Wait(&question_, MPI_STATUS_IGNORE);
    MPI_Comm_free(&status_comm_);
  }
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
    // Check a few times per timeout so a hang is reported within ~1.25x the timeout, and
    // often enough that another rank's question is answered within its grace period.
    const double period = std::min(timeout > 0 ? timeout / 4 : 1.0, status_comm_ != MPI_COMM_NULL ? 0.1 : 1.0);
    wake_.wait_for(lock, std::chrono::duration<double>(period));
    if (stop_) break;
    answer_questions();
    const int64_t since = armed_since_ns_.load(std::memory_order_acquire);
    if (timeout <= 0 || since == 0) continue;
    const double waited = (now_ns() - since) * 1e-9;
    if (waited > timeout) fire(waited);
  }
}

RankStatus Watchdog::status() const {
  RankStatus s;
  s.completed = completed_.load(std::memory_order_acquire);
  const int64_t since = armed_since_ns_.load(std::memory_order_acquire);
  if (since != 0) {
    s.waiting = 1;
    s.op = static_cast<int32_t>(op_);
    s.bytes = bytes_;
    s.waited_seconds = (now_ns() - since) * 1e-9;
    RankStatus::set_name(s.axis, *axis_);
  }
  if (const std::string* last = last_axis_.load(std::memory_order_relaxed)) {
    s.has_last = 1;
    s.last_op = last_op_.load(std::memory_order_relaxed);
    s.last_bytes = last_bytes_.load(std::memory_order_relaxed);
    RankStatus::set_name(s.last_axis, *last);
  }
  return s;
}

void Watchdog::answer_questions() {
  if (status_comm_ == MPI_COMM_NULL) return;
  for (;;) {
    int arrived = 0;
    MPI_Status from;
    MPI_Test(&question_, &arrived, &from);
    if (!arrived) return;
    const RankStatus mine = status();
    MPI_Send(&mine, sizeof mine, MPI_BYTE, from.MPI_SOURCE, kAnswerTag, status_comm_);
    MPI_Irecv(&question_buffer_, 1, MPI_INT, MPI_ANY_SOURCE, kQuestionTag, status_comm_, &question_);
  }
}

void Watchdog::fire(double waited_seconds) {
  std::fprintf(stderr,
               "rank %d: watchdog: %s over axis '%s' (%lld bytes) not done after %.1f s (timeout %.1f s); "
               "some rank of the axis is missing from this collective or called a different one\n",
               rank_, to_string(op_).c_str(), axis_->c_str(), static_cast<long long>(bytes_), waited_seconds,
               timeout_seconds_.load());
  const RankStatus mine = status();
  std::fprintf(stderr, "rank %d: watchdog: this rank had completed %lld waits on collectives before it", rank_,
               static_cast<long long>(mine.completed));
  if (mine.has_last) {
    std::fprintf(stderr, ", the last a %s over '%s' (%lld bytes)", to_string(static_cast<CollectiveOp>(mine.last_op)).c_str(),
                 mine.last_axis, static_cast<long long>(mine.last_bytes));
  }
  std::fprintf(stderr, "; a rank that reports fewer fell behind (set the timeout with --collective-timeout)\n");
  std::fflush(stderr);
  if (status_comm_ != MPI_COMM_NULL) {
    // Ask every rank where it is; wait a grace period for the answers, answering the
    // others' questions meanwhile (they may be timing out too).
    int size = 1;
    MPI_Comm_size(status_comm_, &size);
    std::vector<std::optional<RankStatus>> answers(size);
    std::vector<RankStatus> received(size);
    std::vector<MPI_Request> replies(size, MPI_REQUEST_NULL);
    const int question = 1;
    for (int r = 0; r < size; ++r) {
      if (r == rank_) continue;
      MPI_Request ask;
      MPI_Isend(&question, 1, MPI_INT, r, kQuestionTag, status_comm_, &ask);
      MPI_Request_free(&ask);
      MPI_Irecv(&received[r], sizeof(RankStatus), MPI_BYTE, r, kAnswerTag, status_comm_, &replies[r]);
    }
    answers[rank_] = mine;
    const double grace = std::clamp(timeout_seconds_.load() / 2, 1.0, 5.0);
    const int64_t until = now_ns() + static_cast<int64_t>(grace * 1e9);
    int pending = size - 1;
    while (pending > 0 && now_ns() < until) {
      answer_questions();
      for (int r = 0; r < size; ++r) {
        int done = 0;
        if (replies[r] == MPI_REQUEST_NULL) continue;
        MPI_Test(&replies[r], &done, MPI_STATUS_IGNORE);
        if (done) answers[r] = received[r], --pending;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::fprintf(stderr, "%s", describe_job(answers, rank_).c_str());
    std::fflush(stderr);
  }
  // Called from the watchdog thread while the main thread is stuck inside MPI: the job is
  // lost either way, and MPI_Abort is the one call that ends every rank.
  MPI_Abort(abort_comm_, 1);
  std::abort();
}

}  // namespace shardlab::parallel
