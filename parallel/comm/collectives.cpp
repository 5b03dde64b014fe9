#include "parallel/comm/collectives.h"

#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "framework/error.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/ring_algorithms.h"
#include "parallel/comm/schedule.h"
#include "parallel/comm/two_level.h"

namespace shardlab::parallel {

using Clock = std::chrono::steady_clock;

struct CollectiveHandle::State {
  const AxisGroup* group = nullptr;
  CommRecord record;
  Clock::time_point start;
  Clock::time_point held_until;       // native in delay mode: when the emulated links finish it
  std::unique_ptr<ScheduleRun> run;   // ring / bidir
  std::vector<MPI_Request> requests;  // native
  std::function<void()> finish;       // once the messages are done: an encoded recv decodes
  bool done = false;
};

namespace {

double seconds_of(Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

// A collective whose algorithm is settled: everything the trace and the link model need.
struct Launch {
  const AxisGroup& group;
  CollectiveOp op;
  Algorithm algorithm;
  int64_t bytes;
  int shift = 1;
};

// Algorithms run by MPI calls whose hops shardlab does not see (native, two_level).
bool mpi_hides_hops(Algorithm a) { return a == Algorithm::kNative || a == Algorithm::kTwoLevel; }

std::unique_ptr<CollectiveHandle::State> begin(const Launch& l) {
  auto s = std::make_unique<CollectiveHandle::State>();
  s->group = &l.group;
  s->record = {l.group.name(), l.op, l.algorithm, l.group.size(), l.bytes};
  s->record.predicted = l.group.context().links.predict_seconds(l.op, l.algorithm, l.group, l.bytes, l.shift);
  s->start = Clock::now();
  s->record.start = seconds_of(s->start);
  LinkEmulation& links = l.group.context().links;
  if (mpi_hides_hops(l.algorithm) && links.mode() == LinkMode::kDelay) {  // held as a whole: MPI hides its hops
    std::vector<int> axes;
    for (const Axis* a : l.group.axes()) axes.push_back(a->index);
    s->held_until = links.reserve(axes, s->start, s->record.predicted);
  }
  return s;
}

bool point_to_point(CollectiveOp op) { return op == CollectiveOp::kSend || op == CollectiveOp::kRecv; }

// Waits for point-to-point requests without holding the core: a pipeline stage can wait
// a whole stage's compute for its input, and the ranks computing meanwhile may share its
// core (several ranks per core, or its OpenMP threads). Spins briefly, then sleeps
// between polls, backing off from 10 us to 200 us -- noise beside a stage's compute.
void wait_patiently(std::vector<MPI_Request>& requests) {
  const auto spin_until = Clock::now() + std::chrono::microseconds(100);
  auto pause = std::chrono::microseconds(10);
  for (int finished = 0;;) {
    SL_MPI(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &finished, MPI_STATUSES_IGNORE));
    if (finished) return;
    if (Clock::now() < spin_until) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

// Finishes the collective if it can (always, when blocking); records it once done.
bool progress(CollectiveHandle::State& s, bool block) {
  if (s.done) return true;
  CommContext& context = s.group->context();
  const LinkEmulation& links = context.links;
  double emulated = 0;
  if (s.run) {
    if (block) {
      s.run->wait();
    } else if (!s.run->test()) {
      return false;
    }
    emulated = s.run->emulated_seconds();
  } else {
    // MPI hides a native collective's hops: emulate it as a whole at its predicted time.
    emulated = s.record.predicted;
    const int count = static_cast<int>(s.requests.size());
    if (block && point_to_point(s.record.op)) {
      wait_patiently(s.requests);
      links.hold_until(s.held_until);
    } else if (block) {
      SL_MPI(MPI_Waitall(count, s.requests.data(), MPI_STATUSES_IGNORE));
      links.hold_until(s.held_until);
    } else {
      int finished = 0;
      SL_MPI(MPI_Testall(count, s.requests.data(), &finished, MPI_STATUSES_IGNORE));
      if (!finished || (links.mode() == LinkMode::kDelay && Clock::now() < s.held_until)) return false;
    }
  }
  if (s.finish) s.finish();
  s.record.end = seconds_of(Clock::now());
  s.record.emulated = links.mode() == LinkMode::kOff ? 0 : emulated;
  context.trace.record(s.record);
  s.done = true;
  return true;
}

void wait_watched(CollectiveHandle::State& s) {
  if (s.done) return;
  Watchdog::Guard guard(s.group->context().watchdog, s.group->name(), s.record.op, s.record.bytes);
  progress(s, true);
}

// One collective ready to run: how native does it (blocking and nonblocking MPI calls)
// and the schedule ring/bidir follow.
struct Plan {
  Launch launch;
  std::function<void()> native;
  std::function<void(std::vector<MPI_Request>&)> native_async;
  std::function<Schedule()> schedule;
  std::function<void()> finish = nullptr;  // after the messages (State::finish)
};

void run(const Plan& p);

CollectiveHandle start(const Plan& p) {
  if (p.launch.algorithm == Algorithm::kTwoLevel) {  // blocking only (two_level.h)
    run(p);
    return CollectiveHandle();
  }
  auto s = begin(p.launch);
  s->finish = p.finish;
  if (p.launch.algorithm == Algorithm::kNative) {
    p.native_async(s->requests);
  } else {
    s->run = std::make_unique<ScheduleRun>(p.schedule(), p.launch.group.context().links);
    s->run->test();  // post the first step so the transfer starts at once
  }
  return CollectiveHandle(std::move(s));
}

// Blocking form: native calls MPI's blocking collective (faster than its nonblocking
// twin for small messages), two_level its blocking phases; the neighbour algorithms run
// their schedule to the end, and point-to-point waits patiently.
void run(const Plan& p) {
  if (!mpi_hides_hops(p.launch.algorithm) || point_to_point(p.launch.op)) {
    start(p).wait();
    return;
  }
  const Launch& l = p.launch;
  auto s = begin(l);
  {
    Watchdog::Guard guard(l.group.context().watchdog, l.group.name(), l.op, l.bytes);
    p.native();
  }
  progress(*s, true);  // no requests left: applies the delay and records
}

[[noreturn]] void size_error(const AxisGroup& g, CollectiveOp op, const std::string& detail) {
  throw UserError(to_string(op) + " over axis '" + g.name() + "' (" + std::to_string(g.size()) + " ranks): " + detail);
}

void check_disjoint(const AxisGroup& g, CollectiveOp op, std::span<const float> in, std::span<const float> out) {
  if (in.data() < out.data() + out.size() && out.data() < in.data() + in.size() && !in.empty() && !out.empty()) {
    size_error(g, op, "output overlaps input; give it its own buffer");
  }
}

std::string floats(size_t n) { return std::to_string(n) + " floats"; }

// Checks the sizes; true when the group has one rank and the copy has been done.
bool prepare(const AxisGroup& g, CollectiveOp op, std::span<const float> in, std::span<float> out) {
  const size_t n = static_cast<size_t>(g.size());
  check_disjoint(g, op, in, out);
  switch (op) {
    case CollectiveOp::kAllGather:
      if (out.size() != in.size() * n) size_error(g, op, "output has " + floats(out.size()) + ", expected " + std::to_string(n) + " x " + floats(in.size()));
      break;
    case CollectiveOp::kReduceScatter:
      if (in.size() != out.size() * n) {
        size_error(g, op, "input of " + floats(in.size()) + " is not " + std::to_string(n) + " shards of the output's " +
                              floats(out.size()) + "; pad the input to a multiple of " + std::to_string(n));
      }
      break;
    case CollectiveOp::kAllToAll:
      if (in.size() != out.size() || in.size() % n != 0) {
        size_error(g, op, "input " + floats(in.size()) + " and output " + floats(out.size()) +
                              " must be equal and a multiple of " + std::to_string(n) + "; pad them");
      }
      break;
    default:
      if (in.size() != out.size()) size_error(g, op, "input " + floats(in.size()) + " and output " + floats(out.size()) + " differ");
  }
  if (n > 1) return false;
  if (!in.empty()) std::memcpy(out.data(), in.data(), in.size() * sizeof(float));
  return true;
}

const Axis& single_axis_of(const AxisGroup& g, CollectiveOp op) {
  if (g.axes().size() != 1) size_error(g, op, "needs a single axis, not a group");
  return g.single_axis();
}

int check_peer(const AxisGroup& g, CollectiveOp op, int coord, int tag) {
  const Axis& axis = single_axis_of(g, op);
  if (coord < 0 || coord >= axis.size || coord == axis.coord) {
    size_error(g, op, "peer coordinate " + std::to_string(coord) + " is not another rank of the axis (this rank is " +
                          std::to_string(axis.coord) + " of " + std::to_string(axis.size) + ")");
  }
  if (tag < 0 || tag >= kFirstScheduleTag) size_error(g, op, "tag " + std::to_string(tag) + " outside [0, " + std::to_string(kFirstScheduleTag) + ")");
  return coord;
}

Launch launch(const AxisGroup& g, CollectiveOp op, int64_t bytes, Algorithm requested, int shift = 1) {
  return {g, op, resolve_algorithm(g, op, bytes, requested), bytes, shift};
}

// An encoded wire runs on the neighbour rings: MPI neither sums bf16 or int8 nor rounds a
// rank's own chunk to what the others receive.
Launch wire_launch(const AxisGroup& g, CollectiveOp op, int64_t elements, Algorithm a, DType wire) {
  Launch l = launch(g, op, wire_bytes(wire, elements), a);
  if (wire != DType::kF32 && l.algorithm != Algorithm::kBidir) l.algorithm = Algorithm::kRing;
  return l;
}

void check_feedback(const AxisGroup& g, CollectiveOp op, int64_t elements, std::span<float> feedback) {
  if (!feedback.empty() && static_cast<int64_t>(feedback.size()) != feedback_floats(g, op, elements)) {
    size_error(g, op, "error feedback of " + floats(feedback.size()) + ", expected " +
                          floats(static_cast<size_t>(feedback_floats(g, op, elements))) + " (error_feedback_floats)");
  }
}

std::optional<Plan> plan_all_gather(const AxisGroup& g, std::span<const float> in, std::span<float> out, Algorithm a,
                                    DType wire) {
  if (prepare(g, CollectiveOp::kAllGather, in, out)) return std::nullopt;
  const int n = mpi_count(in.size());
  const Launch l = wire_launch(g, CollectiveOp::kAllGather, static_cast<int64_t>(out.size()), a, wire);
  return Plan{l,
              [=, &g] { SL_MPI(MPI_Allgather(in.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, g.comm())); },
              [=, &g](std::vector<MPI_Request>& r) {
                SL_MPI(MPI_Iallgather(in.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, g.comm(), &r.emplace_back()));
              },
              [=, &g] { return ring_all_gather(g, in, out, l.algorithm == Algorithm::kBidir, wire); }};
}

std::optional<Plan> plan_reduce_scatter(const AxisGroup& g, std::span<const float> in, std::span<float> out,
                                        Algorithm a, DType wire, std::span<float> feedback) {
  check_feedback(g, CollectiveOp::kReduceScatter, static_cast<int64_t>(in.size()), feedback);
  if (prepare(g, CollectiveOp::kReduceScatter, in, out)) return std::nullopt;
  const int n = mpi_count(out.size());
  const Launch l = wire_launch(g, CollectiveOp::kReduceScatter, static_cast<int64_t>(in.size()), a, wire);
  return Plan{l,
              [=, &g] { SL_MPI(MPI_Reduce_scatter_block(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, g.comm())); },
              [=, &g](std::vector<MPI_Request>& r) {
                SL_MPI(MPI_Ireduce_scatter_block(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, g.comm(), &r.emplace_back()));
              },
              [=, &g] { return ring_reduce_scatter(g, in, out, l.algorithm == Algorithm::kBidir, wire, feedback); }};
}

std::optional<Plan> plan_all_reduce(const AxisGroup& g, std::span<float> buffer, ReduceOp op, Algorithm a, DType wire,
                                    std::span<float> feedback) {
  check_feedback(g, CollectiveOp::kAllReduce, static_cast<int64_t>(buffer.size()), feedback);
  if (g.size() == 1) return std::nullopt;
  const int n = mpi_count(buffer.size());
  const MPI_Op mpi_op = op == ReduceOp::kSum ? MPI_SUM : MPI_MAX;
  const Launch l = wire_launch(g, CollectiveOp::kAllReduce, static_cast<int64_t>(buffer.size()), a, wire);
  if (l.algorithm == Algorithm::kTwoLevel) {
    return Plan{l, [=, &g] { two_level_all_reduce(g.context().hosts.of(g), buffer, op, g.context().scratch); }, nullptr,
                nullptr};
  }
  return Plan{l,
              [=, &g] { SL_MPI(MPI_Allreduce(MPI_IN_PLACE, buffer.data(), n, MPI_FLOAT, mpi_op, g.comm())); },
              [=, &g](std::vector<MPI_Request>& r) {
                SL_MPI(MPI_Iallreduce(MPI_IN_PLACE, buffer.data(), n, MPI_FLOAT, mpi_op, g.comm(), &r.emplace_back()));
              },
              [=, &g] { return ring_all_reduce(g, buffer, op, l.algorithm == Algorithm::kBidir, wire, feedback); }};
}

// The messages that are not sums (all_to_all, ppermute, send/recv) carry fp32 or bf16:
// an int8 block would be re-encoded from another start where a ring relays part of a message.
void check_copy_wire(const AxisGroup& g, CollectiveOp op, DType wire) {
  if (wire == DType::kInt8) size_error(g, op, "carries fp32 or bf16, not int8 (block-scaled int8 is for sums and gathers)");
}

std::optional<Plan> plan_all_to_all(const AxisGroup& g, std::span<const float> in, std::span<float> out, Algorithm a,
                                    DType wire) {
  check_copy_wire(g, CollectiveOp::kAllToAll, wire);
  if (prepare(g, CollectiveOp::kAllToAll, in, out)) return std::nullopt;
  const int n = mpi_count(in.size() / g.size());
  const Launch l = wire_launch(g, CollectiveOp::kAllToAll, static_cast<int64_t>(in.size()), a, wire);
  return Plan{l,
              [=, &g] { SL_MPI(MPI_Alltoall(in.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, g.comm())); },
              [=, &g](std::vector<MPI_Request>& r) {
                SL_MPI(MPI_Ialltoall(in.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, g.comm(), &r.emplace_back()));
              },
              [=, &g] { return ring_all_to_all(g, in, out, l.algorithm == Algorithm::kBidir, wire); }};
}

std::optional<Plan> plan_ppermute(const AxisGroup& g, std::span<const float> in, std::span<float> out, int shift,
                                  Algorithm a, DType wire) {
  const Axis& axis = single_axis_of(g, CollectiveOp::kPermute);
  check_copy_wire(g, CollectiveOp::kPermute, wire);
  if (prepare(g, CollectiveOp::kPermute, in, out)) return std::nullopt;
  const int n = mpi_count(in.size());
  Launch l = wire_launch(g, CollectiveOp::kPermute, static_cast<int64_t>(in.size()), a, wire);
  l.shift = shift;
  // Native sends straight to the target rank and lets MPI route it.
  const int to = axis.shifted(shift), from = axis.shifted(-shift), tag = take_collective_tag(g, axis);
  return Plan{l,
              [=, &axis] {
                SL_MPI(MPI_Sendrecv(in.data(), n, MPI_FLOAT, to, tag, out.data(), n, MPI_FLOAT, from, tag,
                                    axis.comm.get(), MPI_STATUS_IGNORE));
              },
              [=, &axis](std::vector<MPI_Request>& r) {
                SL_MPI(MPI_Irecv(out.data(), n, MPI_FLOAT, from, tag, axis.comm.get(), &r.emplace_back()));
                SL_MPI(MPI_Isend(in.data(), n, MPI_FLOAT, to, tag, axis.comm.get(), &r.emplace_back()));
              },
              [=, &g] { return ring_ppermute(g, in, out, shift, l.algorithm == Algorithm::kBidir, wire); }};
}

// Point-to-point: always direct MPI on the axis communicator. An encoded wire sends the
// message encoded from a buffer the collective owns, and decodes a recv once it is in.
Plan plan_point_to_point(const AxisGroup& g, CollectiveOp op, std::span<float> buffer, int coord, int tag, DType wire) {
  check_peer(g, op, coord, tag);
  check_copy_wire(g, op, wire);
  const MPI_Comm comm = g.single_axis().comm.get();
  const int64_t elements = static_cast<int64_t>(buffer.size());
  const Launch l{g, op, Algorithm::kNative, wire_bytes(wire, elements)};
  void* data = buffer.data();
  MPI_Datatype type = MPI_FLOAT;
  int n = mpi_count(buffer.size());
  std::function<void()> finish;
  if (wire != DType::kF32) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(l.bytes));
    if (op == CollectiveOp::kSend) encode(wire, buffer.data(), elements, bytes->data());
    data = bytes->data();
    type = MPI_BYTE;
    n = mpi_count(bytes->size());
    finish = [op, wire, bytes, buffer] {  // holds the encoded message until it has travelled
      if (op == CollectiveOp::kRecv) decode(wire, bytes->data(), static_cast<int64_t>(buffer.size()), buffer.data());
    };
  }
  if (op == CollectiveOp::kSend) {
    return Plan{l, [=] { SL_MPI(MPI_Send(data, n, type, coord, tag, comm)); },
                [=](std::vector<MPI_Request>& r) { SL_MPI(MPI_Isend(data, n, type, coord, tag, comm, &r.emplace_back())); },
                nullptr, finish};
  }
  return Plan{l, [=] { SL_MPI(MPI_Recv(data, n, type, coord, tag, comm, MPI_STATUS_IGNORE)); },
              [=](std::vector<MPI_Request>& r) { SL_MPI(MPI_Irecv(data, n, type, coord, tag, comm, &r.emplace_back())); },
              nullptr, finish};
}

// MPI_Send reads a const buffer through a non-const pointer only because MPI's C API
// predates const; the data is never written.
std::span<float> mutable_for_mpi(std::span<const float> s) { return {const_cast<float*>(s.data()), s.size()}; }

void run_if(const std::optional<Plan>& p) {
  if (p) run(*p);
}

CollectiveHandle start_if(const std::optional<Plan>& p) { return p ? start(*p) : CollectiveHandle(); }

}  // namespace

Algorithm resolve_algorithm(const AxisGroup& group, CollectiveOp op, int64_t bytes, Algorithm requested) {
  const bool two_level = op == CollectiveOp::kAllReduce && group.context().hosts.of(group).two_level();
  if (requested == Algorithm::kTwoLevel) return two_level ? Algorithm::kTwoLevel : Algorithm::kNative;
  if (requested != Algorithm::kAuto) return requested;
  if (two_level && bytes >= kTwoLevelMinBytes) return Algorithm::kTwoLevel;
  return group.context().auto_table.choose(op, group.size(), bytes);
}

CollectiveHandle::CollectiveHandle() = default;
CollectiveHandle::CollectiveHandle(std::unique_ptr<State> state) : state_(std::move(state)) {}
CollectiveHandle::CollectiveHandle(CollectiveHandle&&) noexcept = default;
CollectiveHandle::~CollectiveHandle() { wait(); }

CollectiveHandle& CollectiveHandle::operator=(CollectiveHandle&& other) noexcept {
  if (this != &other) {
    wait();
    state_ = std::move(other.state_);
  }
  return *this;
}

bool CollectiveHandle::test() { return !state_ || progress(*state_, false); }

void CollectiveHandle::wait() {
  if (state_) wait_watched(*state_);
}

int64_t error_feedback_floats(const AxisGroup& g, CollectiveOp op, int64_t elements) {
  return feedback_floats(g, op, elements);
}

void all_gather(const AxisGroup& g, std::span<const float> in, std::span<float> out, Algorithm a, DType wire) {
  run_if(plan_all_gather(g, in, out, a, wire));
}
void reduce_scatter(const AxisGroup& g, std::span<const float> in, std::span<float> out, Algorithm a, DType wire,
                    std::span<float> feedback) {
  run_if(plan_reduce_scatter(g, in, out, a, wire, feedback));
}
void all_reduce(const AxisGroup& g, std::span<float> buffer, ReduceOp op, Algorithm a, DType wire,
                std::span<float> feedback) {
  run_if(plan_all_reduce(g, buffer, op, a, wire, feedback));
}
void all_to_all(const AxisGroup& g, std::span<const float> in, std::span<float> out, Algorithm a, DType wire) {
  run_if(plan_all_to_all(g, in, out, a, wire));
}
void ppermute(const AxisGroup& g, std::span<const float> in, std::span<float> out, int shift, Algorithm a, DType wire) {
  run_if(plan_ppermute(g, in, out, shift, a, wire));
}

CollectiveHandle all_gather_async(const AxisGroup& g, std::span<const float> in, std::span<float> out, Algorithm a,
                                  DType wire) {
  return start_if(plan_all_gather(g, in, out, a, wire));
}

namespace {
// A bf16 span as the floats its bit pairs fill.
std::span<const float> as_floats(std::span<const Bf16> v) {
  SL_ASSERT(v.size() % 2 == 0, "a bf16 collective needs an even count, got " + std::to_string(v.size()));
  return {reinterpret_cast<const float*>(v.data()), v.size() / 2};
}
std::span<float> as_floats(std::span<Bf16> v) {
  SL_ASSERT(v.size() % 2 == 0, "a bf16 collective needs an even count, got " + std::to_string(v.size()));
  return {reinterpret_cast<float*>(v.data()), v.size() / 2};
}
}  // namespace

void all_gather(const AxisGroup& g, std::span<const Bf16> in, std::span<Bf16> out, Algorithm a) {
  all_gather(g, as_floats(in), as_floats(out), a);
}

CollectiveHandle all_gather_async(const AxisGroup& g, std::span<const Bf16> in, std::span<Bf16> out, Algorithm a) {
  return all_gather_async(g, as_floats(in), as_floats(out), a);
}
CollectiveHandle reduce_scatter_async(const AxisGroup& g, std::span<const float> in, std::span<float> out,
                                      Algorithm a, DType wire, std::span<float> feedback) {
  return start_if(plan_reduce_scatter(g, in, out, a, wire, feedback));
}
// OpenMPI 4.1's nonblocking all_reduce is slow: across hosts over TCP, 4 MiB at 1 Gb/s took
// 62.6 ms with MPI_Iallreduce + MPI_Wait, against 36 ms for MPI_Allreduce and for the ring
// (docs/collectives.md, "Compressed wires on Ethernet"); on one host, gpt-bench's 13 MB of
// gradient buckets under DP and ZeRO-1 (2 ranks, 2 cores, three interleaved rounds) took
// steps of 113-129 ms (ZeRO-1 126-185 ms) with it, 112-114 ms (ZeRO-1 116 ms) with the ring,
// whose steps our own test() calls drive during backward. So an async all_reduce from 1 MiB
// that `auto` would give to MPI runs the ring.
Algorithm async_all_reduce_algorithm(const AxisGroup& g, int64_t bytes, Algorithm requested) {
  if (requested != Algorithm::kAuto || bytes < kAsyncRingMinBytes) return requested;
  const Algorithm chosen = resolve_algorithm(g, CollectiveOp::kAllReduce, bytes, requested);
  return chosen == Algorithm::kNative ? Algorithm::kRing : chosen;
}

CollectiveHandle all_reduce_async(const AxisGroup& g, std::span<float> buffer, ReduceOp op, Algorithm a, DType wire,
                                  std::span<float> feedback) {
  const Algorithm algorithm = async_all_reduce_algorithm(g, static_cast<int64_t>(buffer.size_bytes()), a);
  return start_if(plan_all_reduce(g, buffer, op, algorithm, wire, feedback));
}
CollectiveHandle all_to_all_async(const AxisGroup& g, std::span<const float> in, std::span<float> out, Algorithm a,
                                  DType wire) {
  return start_if(plan_all_to_all(g, in, out, a, wire));
}
CollectiveHandle ppermute_async(const AxisGroup& g, std::span<const float> in, std::span<float> out, int shift,
                                Algorithm a, DType wire) {
  return start_if(plan_ppermute(g, in, out, shift, a, wire));
}

void send(const AxisGroup& g, std::span<const float> buffer, int to, int tag, DType wire) {
  run(plan_point_to_point(g, CollectiveOp::kSend, mutable_for_mpi(buffer), to, tag, wire));
}
void recv(const AxisGroup& g, std::span<float> buffer, int from, int tag, DType wire) {
  run(plan_point_to_point(g, CollectiveOp::kRecv, buffer, from, tag, wire));
}
CollectiveHandle send_async(const AxisGroup& g, std::span<const float> buffer, int to, int tag, DType wire) {
  return start(plan_point_to_point(g, CollectiveOp::kSend, mutable_for_mpi(buffer), to, tag, wire));
}
CollectiveHandle recv_async(const AxisGroup& g, std::span<float> buffer, int from, int tag, DType wire) {
  return start(plan_point_to_point(g, CollectiveOp::kRecv, buffer, from, tag, wire));
}

}  // namespace shardlab::parallel
