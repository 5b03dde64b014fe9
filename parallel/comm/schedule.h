// Schedule: a collective written as a list of neighbour steps, and the runner that
// executes it -- the machinery under the ring and bidir algorithms (ring_algorithms.h).
//
// A step is what happens in one tick of the ring: copies that prepare it, the messages
// it sends and receives on one axis (MPI_Isend/Irecv, all in flight at once, e.g. both
// ring directions of bidir), the reduction of each message as it arrives, then copies of
// what arrived. A step with `segment` > 0 sends each message as several MPI messages of
// at most `segment` floats and reduces each part as soon as it lands, so the reduction of
// one part overlaps the transfer of the next (a pipelined ring step). The schedule
// owns its scratch buffers; every pointer in its steps points into them or into the
// caller's buffers, which must stay alive until the run completes.
//
// The runner advances step by step, either blocking (wait) or without blocking (test),
// which is how async collectives make progress between compute ops. Under link emulation
// each step accounts, and in delay mode holds, the time its largest message takes on
// the emulated link of its axis (queued behind transfers already booked there).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

#include "framework/precision.h"
#include "parallel/comm/collective_types.h"
#include "parallel/comm/link_emulation.h"

namespace shardlab::parallel {

// One message of a step; `peer` is a rank of the step's communicator. On a compressed
// wire, `residual` (count floats, optional) turns on error feedback for this message
// (framework/ops/wire_format.h): data + residual is encoded, and residual keeps what the
// encoding lost, to be sent with the next call's message from the same place.
struct Send {
  int peer;
  const float* data;
  int64_t count;
  int tag;
  float* residual = nullptr;
};

// A plain recv lands the message in `data`. A reducing recv (reduce_dst set, data null)
// lands it part by part in a small window of the runner's own buffers and computes
// reduce_dst[i] = op(reduce_with[i], part[i]) as each part arrives (reduce_dst may equal
// reduce_with): the raw message never travels through main memory, only the sum does.
// Reductions of one step run in a fixed order -- part by part, recvs in list order -- so
// results never depend on timing.
struct Recv {
  int peer;
  float* data;
  int64_t count;
  int tag;
  float* reduce_dst = nullptr;
  const float* reduce_with = nullptr;
};

struct Combine {
  float* dst;
  const float* src;
  int64_t count;
};

// A span rounded in place to the values its encoding on the schedule's wire decodes to
// (framework/ops/wire_format.h), with error feedback when `residual` is set: what a rank
// keeps of the chunk it then sends, so that it holds exactly what the others receive.
struct Rounding {
  float* data;
  int64_t count;
  float* residual = nullptr;
};

// Both ends of every message must use the same `segment`, so that parts match up.
struct Step {
  MPI_Comm comm = MPI_COMM_NULL;
  int axis = 0;  // mesh axis index, for the link model
  int64_t segment = 0;              // floats per MPI message; 0 = whole messages
  std::vector<Combine> pre_copies;  // dst = src, before the messages are posted
  std::vector<Rounding> roundings;  // after the pre-copies, before the messages are posted
  std::vector<Send> sends;
  std::vector<Recv> recvs;
  std::vector<Combine> post_copies; // dst = src, after the arrivals' reductions
};

// Scratch buffers reused across collectives: a fresh multi-MiB allocation costs page
// faults on every call, which at 64 MiB is slower than the transfer itself.
class ScratchPool {
 public:
  std::vector<float> take(int64_t count);  // at least `count` floats, contents unspecified
  void give(std::vector<float> buffer);

 private:
  std::vector<std::vector<float>> free_;
};

class Schedule {
 public:
  explicit Schedule(ScratchPool& pool) : pool_(&pool) {}
  ~Schedule();
  Schedule(Schedule&&) = default;
  Schedule& operator=(Schedule&&) = delete;

  ReduceOp op = ReduceOp::kSum;
  // What messages carry (framework/ops/wire_format.h): fp32 as is; bf16 or int8 encoded
  // when sent and decoded when they arrive, then reduced in fp32. Both ends of every
  // message must agree, and an int8 message's parts must start on block boundaries
  // (segment a multiple of kInt8Block).
  DType wire = DType::kF32;
  std::vector<Step> steps;

  // A buffer of `count` floats held by the schedule until it is destroyed (then back to
  // the pool); the pointer stays valid for the schedule's life, moves included.
  float* scratch(int64_t count);

 private:
  ScratchPool* pool_;
  std::deque<std::vector<float>> buffers_;
};

class ScheduleRun {
 public:
  ScheduleRun(Schedule schedule, LinkEmulation& links);
  ScheduleRun(const ScheduleRun&) = delete;
  ScheduleRun& operator=(const ScheduleRun&) = delete;

  bool test();  // advances without blocking; true once every step is done
  void wait();
  double emulated_seconds() const { return emulated_; }

 private:
  // One part of a reducing recv, posted into arrival slot (index % arrival slots) once
  // the part that used the slot before it has been reduced.
  struct Arrival {
    int peer;
    int tag;
    float* dst;
    const float* with;
    int64_t count;
  };

  bool advance(bool block);
  void post_step();
  void post_arrival(size_t index);
  bool reduce_arrivals(bool block);
  void finish_step();

  Schedule schedule_;
  LinkEmulation& links_;
  size_t step_ = 0;
  bool posted_ = false;
  std::vector<MPI_Request> requests_;  // sends and plain recvs of the current step
  // An encoded wire's messages of the current step travel from, and plain recvs land in,
  // the staging area (bytes in schedule scratch, grown like the window, reused step to
  // step); landings are decoded into their floats once the step's requests are done.
  struct Landing {
    float* dst;
    const uint8_t* bytes;
    int64_t count;
  };
  uint8_t* stage(int64_t bytes);  // the next `bytes` of the staging area
  std::vector<Landing> landings_;
  uint8_t* staging_ = nullptr;
  int64_t staging_capacity_ = 0, staging_used_ = 0;
  // Reducing recvs land part by part in window_: arrival i in slot i % arrival_slots_,
  // each slot window_part_ bytes (a part of the widest message, on the wire).
  std::vector<Arrival> arrivals_;  // in reduction order
  size_t next_arrival_ = 0;
  size_t arrival_slots_ = 0;
  std::vector<MPI_Request> arrival_requests_;  // one per slot
  uint8_t* window_ = nullptr;
  int64_t window_part_ = 0;
  size_t window_capacity_ = 0;  // parts window_ can hold
  std::vector<float> decoded_;  // an encoded part widened, for a max reduction
  double step_seconds_ = 0;  // emulated time of the current step
  std::chrono::steady_clock::time_point step_deadline_;  // when its emulated links finish it
  double emulated_ = 0;
};

// dst = op(a, b) elementwise; dst may be a or b.
void reduce_into(ReduceOp op, float* dst, const float* a, const float* b, int64_t count);

}  // namespace shardlab::parallel
