#include "parallel/schedule.h"

#include <algorithm>
#include <cstring>

#include "framework/error.h"
#include "parallel/comm.h"

namespace shardlab::parallel {

void reduce_into(ReduceOp op, float* dst, const float* a, const float* b, int64_t count) {
  if (op == ReduceOp::kSum) {
    for (int64_t i = 0; i < count; ++i) dst[i] = a[i] + b[i];
  } else {
    for (int64_t i = 0; i < count; ++i) dst[i] = std::max(a[i], b[i]);
  }
}

std::vector<float> ScratchPool::take(int64_t count) {
  // The smallest free buffer that is large enough.
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (static_cast<int64_t>(it->size()) >= count && (best == free_.end() || it->size() < best->size())) best = it;
  }
  if (best == free_.end()) return std::vector<float>(static_cast<size_t>(count));
  std::vector<float> buffer = std::move(*best);
  free_.erase(best);
  return buffer;
}

void ScratchPool::give(std::vector<float> buffer) { free_.push_back(std::move(buffer)); }

Schedule::~Schedule() {
  for (std::vector<float>& b : buffers_) pool_->give(std::move(b));
}

float* Schedule::scratch(int64_t count) { return buffers_.emplace_back(pool_->take(count)).data(); }

namespace {

void copy_all(const std::vector<Combine>& copies) {
  for (const Combine& c : copies) {
    if (c.count > 0 && c.dst != c.src) std::memcpy(c.dst, c.src, c.count * sizeof(float));
  }
}

}  // namespace

ScheduleRun::ScheduleRun(Schedule schedule, const LinkEmulation& links)
    : schedule_(std::move(schedule)), links_(links) {}

void ScheduleRun::post_step() {
  const Step& step = schedule_.steps[step_];
  copy_all(step.pre_copies);
  requests_.clear();
  arrivals_.clear();
  next_arrival_ = 0;
  int64_t largest = 0;
  const auto parts = [&](int64_t count) { return step.segment > 0 ? (count + step.segment - 1) / step.segment : 1; };
  const auto part_range = [&](int64_t count, int64_t k) {
    const int64_t begin = step.segment > 0 ? k * step.segment : 0;
    return std::pair{begin, step.segment > 0 ? std::min(step.segment, count - begin) : count};
  };
  // Receives first so that an eager message finds its buffer waiting. Arrivals are listed
  // part by part, recvs in order within a part: the reduction order is fixed.
  int64_t most_parts = 0;
  std::vector<size_t> first_request(step.recvs.size());
  for (size_t i = 0; i < step.recvs.size(); ++i) {
    const Recv& m = step.recvs[i];
    first_request[i] = requests_.size();
    if (m.count == 0) continue;
    largest = std::max(largest, m.count);
    most_parts = std::max(most_parts, parts(m.count));
    for (int64_t k = 0; k < parts(m.count); ++k) {
      const auto [begin, count] = part_range(m.count, k);
      SL_MPI(MPI_Irecv(m.data + begin, mpi_count(count), MPI_FLOAT, m.peer, m.tag, step.comm, &requests_.emplace_back()));
    }
  }
  for (int64_t k = 0; k < most_parts; ++k) {
    for (size_t i = 0; i < step.recvs.size(); ++i) {
      const Recv& m = step.recvs[i];
      if (!m.reduce_dst || k >= parts(m.count) || m.count == 0) continue;
      const auto [begin, count] = part_range(m.count, k);
      arrivals_.push_back({first_request[i] + k, m.reduce_dst + begin, m.reduce_with + begin, m.data + begin, count});
    }
  }
  for (const Send& m : step.sends) {
    if (m.count == 0) continue;
    largest = std::max(largest, m.count);
    for (int64_t k = 0; k < parts(m.count); ++k) {
      const auto [begin, count] = part_range(m.count, k);
      SL_MPI(MPI_Isend(m.data + begin, mpi_count(count), MPI_FLOAT, m.peer, m.tag, step.comm, &requests_.emplace_back()));
    }
  }
  step_start_ = std::chrono::steady_clock::now();
  // Each direction of a link is its own wire: the step lasts as long as its largest message.
  step_seconds_ = largest > 0 && links_.mode() != LinkMode::kOff
                      ? links_.hop_seconds(step.axis, largest * static_cast<int64_t>(sizeof(float)))
                      : 0.0;
  posted_ = true;
}

// Reduces the parts that have landed, in order; false if one is still in flight.
bool ScheduleRun::reduce_arrivals(bool block) {
  for (; next_arrival_ < arrivals_.size(); ++next_arrival_) {
    const Arrival& a = arrivals_[next_arrival_];
    MPI_Request& request = requests_[a.request];
    if (block) {
      SL_MPI(MPI_Wait(&request, MPI_STATUS_IGNORE));
    } else {
      int done = 0;
      SL_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (!done) return false;
    }
    reduce_into(schedule_.op, a.dst, a.with, a.data, a.count);
  }
  return true;
}

void ScheduleRun::finish_step() {
  copy_all(schedule_.steps[step_].post_copies);
  emulated_ += step_seconds_;
  posted_ = false;
  ++step_;
}

bool ScheduleRun::advance(bool block) {
  while (step_ < schedule_.steps.size()) {
    if (!posted_) post_step();
    if (block) {
      reduce_arrivals(true);
      SL_MPI(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
      links_.hold(step_start_, step_seconds_);
    } else {
      if (!reduce_arrivals(false)) return false;
      int done = 0;
      SL_MPI(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
      if (!done) return false;
      const auto deadline = step_start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(step_seconds_));
      if (links_.mode() == LinkMode::kDelay && std::chrono::steady_clock::now() < deadline) return false;
    }
    finish_step();
  }
  return true;
}

bool ScheduleRun::test() { return advance(false); }
void ScheduleRun::wait() { advance(true); }

}  // namespace shardlab::parallel
