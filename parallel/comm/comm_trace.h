// CommTrace: what every collective did, for per-axis summaries and a merged timeline.
//
// Each collective adds a CommRecord: group ("tensor", "data+fsdp"), op, algorithm,
// bytes, start and end (steady clock, seconds), and the emulated and predicted times
// (link_emulation.h). Per-group totals are always kept; individual events only while
// recording is on (they feed the Chrome trace and grow with the run).
//
// Sizes follow nccl-tests: all_gather counts the gathered output, reduce_scatter the
// full input, all_reduce/ppermute/send/recv the buffer, all_to_all one rank's buffer.
// Bus bandwidth = bytes / time * factor, with the factor from the GROUP size n (not the
// world size): (n-1)/n for all_gather, reduce_scatter and all_to_all, 2(n-1)/n for
// all_reduce, 1 for point-to-point. It is the per-link rate, comparable across n.
//
// Chrome trace (write_chrome_trace): one JSON file for the whole mesh, opened by Perfetto
// or chrome://tracing: pid = mesh rank, tid 0 = "compute" (ComputeSpan), tid 1.. = one
// lane per axis group; each event is a complete event ("ph":"X") whose args hold the
// algorithm, bytes, emulated and predicted microseconds.
//
//   trace.set_recording(true);
//   { ComputeSpan span(trace, "forward"); model.forward(x); }
//   ...
//   std::cout << trace.format_summary();
//   trace.write_chrome_trace(mesh.comm(), "runs/trace.json");   // collective
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/comm/collective_types.h"

namespace shardlab::parallel {

struct CommRecord {
  std::string group;
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kNative;
  int group_size = 1;
  int64_t bytes = 0;
  double start = 0;      // seconds on the steady clock
  double end = 0;
  double emulated = 0;   // seconds the hops take on the emulated links (0 when mode off)
  double predicted = 0;  // cost-model seconds on the emulated links
};

struct GroupTotals {
  std::string group;
  int group_size = 1;
  int64_t count = 0;
  int64_t bytes = 0;
  double measured = 0;
  double emulated = 0;
  double predicted = 0;
  double bus_bytes = 0;  // sum of bytes * bus factor
  double bus_bandwidth() const { return measured > 0 ? bus_bytes / measured : 0; }
};

// (n-1)/n, 2(n-1)/n or 1; see the header comment.
double bus_factor(CollectiveOp op, int group_size);

class CommTrace {
 public:
  static double now();  // steady clock, seconds

  void record(const CommRecord& record);
  void record_compute(const std::string& name, double start, double end);
  void set_recording(bool on) { recording_ = on; }
  bool recording() const { return recording_; }
  void clear();

  const std::vector<CommRecord>& events() const { return events_; }
  const std::vector<GroupTotals>& totals() const { return totals_; }
  // A fixed-width table, one row per group: count, MiB, measured/emulated/predicted ms, busbw.
  std::string format_summary() const;

  // Collective over `comm`, at start-up: measures this rank's clock offset to rank 0's
  // (measure_clock_offset), so that write_chrome_trace puts every rank's events on rank
  // 0's time axis -- steady clocks on different hosts count from different boots.
  void align_clocks(MPI_Comm comm);
  double clock_offset() const { return clock_offset_; }

  // Collective over `comm`: rank 0 writes every rank's events into one Chrome trace file,
  // their times moved onto rank 0's clock (align_clocks; unaligned, each rank's own). A
  // write that fails (a full disk) is the same UserError on every rank, the file removed.
  void write_chrome_trace(MPI_Comm comm, const std::string& path) const;

 private:
  struct ComputeEvent {
    std::string name;
    double start, end;
  };
  std::string events_json(int rank) const;

  bool recording_ = false;
  double clock_offset_ = 0, clock_error_ = 0;  // this rank's clock minus rank 0's, and its bound
  std::vector<CommRecord> events_;
  std::vector<ComputeEvent> compute_;
  std::vector<GroupTotals> totals_;
};

// How far this rank's `clock` runs ahead of rank 0's, in seconds, measured as NTP and
// Cristian's algorithm do: rank 0 sends a probe at t0, the rank answers with its clock t,
// rank 0 receives at t1; then offset = t - (t0 + t1) / 2, within half the round trip. Of
// `rounds` probes the one with the shortest round trip wins. Collective over `comm`; rank
// 0 gets 0. `error` (if given) receives the bound, half that round trip.
double measure_clock_offset(MPI_Comm comm, double (*clock)() = CommTrace::now, int rounds = 16,
                            double* error = nullptr);

// Marks a compute region in the trace's compute lane (when recording).
class ComputeSpan {
 public:
  ComputeSpan(CommTrace& trace, std::string name) : trace_(trace), name_(std::move(name)), start_(CommTrace::now()) {}
  ~ComputeSpan() { trace_.record_compute(name_, start_, CommTrace::now()); }
  ComputeSpan(const ComputeSpan&) = delete;
  ComputeSpan& operator=(const ComputeSpan&) = delete;

 private:
  CommTrace& trace_;
  std::string name_;
  double start_;
};

}  // namespace shardlab::parallel
