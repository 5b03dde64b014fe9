#include "parallel/comm/schedule.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "framework/error.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/comm_context.h"

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

// Parts of one reducing recv in flight at once: enough to keep the link busy while one
// part is reduced, few enough that the window stays in cache.
constexpr int64_t kWindowParts = 4;

// Part k of a message of `count` floats cut into parts of `segment` (0: one part).
int64_t part_count(int64_t count, int64_t segment) { return segment > 0 ? (count + segment - 1) / segment : 1; }
std::pair<int64_t, int64_t> part_range(int64_t count, int64_t segment, int64_t k) {
  const int64_t begin = segment > 0 ? k * segment : 0;
  return {begin, segment > 0 ? std::min(segment, count - begin) : count};
}

// What one part of a message is on the wire: floats as they are, or the bytes of an
// encoded wire.
struct WirePart {
  int count;
  MPI_Datatype type;
};
WirePart wire_part(DType wire, int64_t floats) {
  if (wire == DType::kF32) return {mpi_count(floats), MPI_FLOAT};
  return {mpi_count(wire_bytes(wire, floats)), MPI_BYTE};
}

void copy_all(const std::vector<Combine>& copies) {
  for (const Combine& c : copies) {
    if (c.count > 0 && c.dst != c.src) std::memcpy(c.dst, c.src, c.count * sizeof(float));
  }
}

}  // namespace

ScheduleRun::ScheduleRun(Schedule schedule, LinkEmulation& links)
    : schedule_(std::move(schedule)), links_(links) {}

void ScheduleRun::post_step() {
  const Step& step = schedule_.steps[step_];
  const DType wire = schedule_.wire;
  const bool encoded = wire != DType::kF32;
  SL_ASSERT(wire != DType::kInt8 || step.segment % kInt8Block == 0, "int8 message parts must start on block boundaries");
  copy_all(step.pre_copies);
  for (const Rounding& r : step.roundings) round_to_wire(wire, r.data, r.count, r.residual);
  requests_.clear();
  landings_.clear();
  if (encoded) {  // room for every message of the step at once
    int64_t needed = 0;
    for (const Send& m : step.sends) {
      for (int64_t k = 0; k < part_count(m.count, step.segment); ++k) needed += wire_bytes(wire, part_range(m.count, step.segment, k).second);
    }
    for (const Recv& m : step.recvs) {
      if (m.reduce_dst) continue;
      for (int64_t k = 0; k < part_count(m.count, step.segment); ++k) needed += wire_bytes(wire, part_range(m.count, step.segment, k).second);
    }
    if (staging_capacity_ < needed) {
      staging_ = reinterpret_cast<uint8_t*>(schedule_.scratch((needed + 3) / 4));
      staging_capacity_ = needed;
    }
    staging_used_ = 0;
  }
  arrivals_.clear();
  next_arrival_ = 0;
  int64_t largest = 0, reducing = 0, widest_part = 0;
  // Plain receives first, so that an eager message finds its buffer waiting.
  for (const Recv& m : step.recvs) {
    if (m.count == 0) continue;
    largest = std::max(largest, m.count);
    if (m.reduce_dst) {
      SL_ASSERT(m.data == nullptr, "a reducing recv lands in the runner's window, not in `data`");
      widest_part = std::max(widest_part, part_range(m.count, step.segment, 0).second);
      ++reducing;
      continue;
    }
    for (int64_t k = 0; k < part_count(m.count, step.segment); ++k) {
      const auto [begin, count] = part_range(m.count, step.segment, k);
      const WirePart w = wire_part(wire, count);
      void* into = m.data + begin;
      if (encoded) into = const_cast<uint8_t*>(landings_.emplace_back(Landing{m.data + begin, stage(w.count), count}).bytes);
      SL_MPI(MPI_Irecv(into, w.count, w.type, m.peer, m.tag, step.comm, &requests_.emplace_back()));
    }
  }
  // Reducing receives, part by part and recvs in order within a part: the fixed reduction
  // order. Parts of one message are posted in order, as its sender posts them, so MPI's
  // in-order matching pairs them up (a step never has two recvs from one peer with one tag).
  for (int64_t k = 0;; ++k) {
    const size_t before = arrivals_.size();
    for (const Recv& m : step.recvs) {
      if (!m.reduce_dst || k >= part_count(m.count, step.segment)) continue;
      const auto [begin, count] = part_range(m.count, step.segment, k);
      if (count > 0) arrivals_.push_back({m.peer, m.tag, m.reduce_dst + begin, m.reduce_with + begin, count});
    }
    if (arrivals_.size() == before) break;
  }
  arrival_slots_ = std::min(static_cast<size_t>(kWindowParts * reducing), arrivals_.size());
  const int64_t part_bytes = wire_bytes(wire, widest_part);
  if (window_capacity_ < arrival_slots_ || window_part_ < part_bytes) {
    window_part_ = std::max(window_part_, part_bytes);
    window_capacity_ = std::max(window_capacity_, arrival_slots_);
    window_ = reinterpret_cast<uint8_t*>(schedule_.scratch((window_part_ * static_cast<int64_t>(window_capacity_) + 3) / 4));
  }
  arrival_requests_.assign(arrival_slots_, MPI_REQUEST_NULL);
  for (size_t j = 0; j < arrival_slots_; ++j) post_arrival(j);
  // Every part of every send is posted at once: a sender that held parts back until
  // earlier ones completed measured up to 2x slower over shared memory and TCP.
  for (const Send& m : step.sends) {
    if (m.count == 0) continue;
    largest = std::max(largest, m.count);
    for (int64_t k = 0; k < part_count(m.count, step.segment); ++k) {
      const auto [begin, count] = part_range(m.count, step.segment, k);
      const WirePart w = wire_part(wire, count);
      const void* from = m.data + begin;
      if (encoded) {
        uint8_t* bytes = stage(w.count);
        encode(wire, m.data + begin, count, bytes, m.residual ? m.residual + begin : nullptr);
        from = bytes;
      }
      SL_MPI(MPI_Isend(from, w.count, w.type, m.peer, m.tag, step.comm, &requests_.emplace_back()));
    }
  }
  // Each direction of a link is its own wire: the step lasts as long as its largest message.
  step_seconds_ = largest > 0 && links_.mode() != LinkMode::kOff ? links_.hop_seconds(step.axis, wire_bytes(wire, largest))
                                                                  : 0.0;
  const int axis[] = {step.axis};
  step_deadline_ = links_.reserve(axis, std::chrono::steady_clock::now(), step_seconds_);
  posted_ = true;
}

uint8_t* ScheduleRun::stage(int64_t bytes) {
  SL_ASSERT(staging_used_ + bytes <= staging_capacity_, "a step staged more than it sized");
  uint8_t* at = staging_ + staging_used_;
  staging_used_ += bytes;
  return at;
}

void ScheduleRun::post_arrival(size_t index) {
  const Arrival& a = arrivals_[index];
  const size_t slot = index % arrival_slots_;
  const WirePart w = wire_part(schedule_.wire, a.count);
  SL_MPI(MPI_Irecv(window_ + static_cast<int64_t>(slot) * window_part_, w.count, w.type, a.peer, a.tag,
                   schedule_.steps[step_].comm, &arrival_requests_[slot]));
}

// Reduces the parts that have landed, in order, posting each freed slot's next part;
// false if one is still in flight.
bool ScheduleRun::reduce_arrivals(bool block) {
  for (; next_arrival_ < arrivals_.size(); ++next_arrival_) {
    const Arrival& a = arrivals_[next_arrival_];
    const size_t slot = next_arrival_ % arrival_slots_;
    if (block) {
      SL_MPI(MPI_Wait(&arrival_requests_[slot], MPI_STATUS_IGNORE));
    } else {
      int done = 0;
      SL_MPI(MPI_Test(&arrival_requests_[slot], &done, MPI_STATUS_IGNORE));
      if (!done) return false;
    }
    const uint8_t* part = window_ + static_cast<int64_t>(slot) * window_part_;
    if (schedule_.wire == DType::kF32) {
      reduce_into(schedule_.op, a.dst, a.with, reinterpret_cast<const float*>(part), a.count);
    } else if (schedule_.op == ReduceOp::kSum) {
      add_decoded(schedule_.wire, part, a.count, a.with, a.dst);
    } else {
      decoded_.resize(static_cast<size_t>(a.count));
      decode(schedule_.wire, part, a.count, decoded_.data());
      reduce_into(schedule_.op, a.dst, a.with, decoded_.data(), a.count);
    }
    if (next_arrival_ + arrival_slots_ < arrivals_.size()) post_arrival(next_arrival_ + arrival_slots_);
  }
  return true;
}

void ScheduleRun::finish_step() {
  for (const Landing& l : landings_) decode(schedule_.wire, l.bytes, l.count, l.dst);
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
      links_.hold_until(step_deadline_);
    } else {
      if (!reduce_arrivals(false)) return false;
      int done = 0;
      SL_MPI(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
      if (!done) return false;
      if (links_.mode() == LinkMode::kDelay && std::chrono::steady_clock::now() < step_deadline_) return false;
    }
    finish_step();
  }
  return true;
}

bool ScheduleRun::test() { return advance(false); }
void ScheduleRun::wait() { advance(true); }

}  // namespace shardlab::parallel
