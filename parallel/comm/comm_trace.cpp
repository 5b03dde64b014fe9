#include "parallel/comm/comm_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "framework/error.h"
#include "framework/output_path.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/comm_context.h"

namespace shardlab::parallel {

double bus_factor(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return (n - 1.0) / n;
    case CollectiveOp::kAllReduce:
      return 2.0 * (n - 1.0) / n;
    default:
      return 1.0;
  }
}

double CommTrace::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void CommTrace::record(const CommRecord& r) {
  auto it = std::find_if(totals_.begin(), totals_.end(), [&](const GroupTotals& t) { return t.group == r.group; });
  if (it == totals_.end()) {
    totals_.push_back({r.group, r.group_size});
    it = totals_.end() - 1;
  }
  it->count += 1;
  it->bytes += r.bytes;
  it->measured += r.end - r.start;
  it->emulated += r.emulated;
  it->predicted += r.predicted;
  it->bus_bytes += r.bytes * bus_factor(r.op, r.group_size);
  if (recording_) events_.push_back(r);
}

void CommTrace::record_compute(const std::string& name, double start, double end) {
  if (recording_) compute_.push_back({name, start, end});
}

void CommTrace::clear() {
  events_.clear();
  compute_.clear();
  totals_.clear();
}

std::string CommTrace::format_summary() const {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %5s %9s %10s %12s %12s %12s %12s\n", "axis", "n", "count", "MiB",
                "measured_ms", "emulated_ms", "predicted_ms", "busbw_GB/s");
  out << line;
  for (const GroupTotals& t : totals_) {
    std::snprintf(line, sizeof line, "%-16s %5d %9lld %10.2f %12.3f %12.3f %12.3f %12.3f\n", t.group.c_str(),
                  t.group_size, static_cast<long long>(t.count), t.bytes / 1048576.0, t.measured * 1e3,
                  t.emulated * 1e3, t.predicted * 1e3, t.bus_bandwidth() / 1e9);
    out << line;
  }
  return out.str();
}

// Events of one rank as JSON objects, one per line, each followed by a comma; times in
// microseconds on rank 0's clock.
std::string CommTrace::events_json(int rank) const {
  using json = nlohmann::ordered_json;  // keys in the order written
  std::map<std::string, int> lanes;  // group -> tid; 0 is compute
  for (const CommRecord& r : events_) lanes.emplace(r.group, 0);
  int next = 1;
  for (auto& [group, tid] : lanes) tid = next++;

  std::string out;
  const auto add = [&out](const json& event) { out += event.dump() + ",\n"; };
  std::string name = "rank " + std::to_string(rank);
  if (rank > 0 && clock_error_ > 0) {
    char clock[96];
    std::snprintf(clock, sizeof clock, " (clock %+.1f us vs rank 0, +-%.1f us)", clock_offset_ * 1e6, clock_error_ * 1e6);
    name += clock;
  }
  add({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", name}}}});
  add({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "compute"}}}});
  for (const auto& [group, tid] : lanes) {
    add({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", tid}, {"args", {{"name", "axis " + group}}}});
  }
  const double shift = clock_offset_;  // onto rank 0's clock
  for (const ComputeEvent& c : compute_) {
    add({{"name", c.name}, {"cat", "compute"}, {"ph", "X"}, {"pid", rank}, {"tid", 0},
         {"ts", (c.start - shift) * 1e6}, {"dur", (c.end - c.start) * 1e6}});
  }
  for (const CommRecord& r : events_) {
    const json args{{"axis", r.group},          {"algorithm", to_string(r.algorithm)}, {"bytes", r.bytes},
                    {"group_size", r.group_size}, {"emulated_us", r.emulated * 1e6},    {"predicted_us", r.predicted * 1e6}};
    add({{"name", to_string(r.op)}, {"cat", "comm"}, {"ph", "X"}, {"pid", rank}, {"tid", lanes[r.group]},
         {"ts", (r.start - shift) * 1e6}, {"dur", (r.end - r.start) * 1e6}, {"args", args}});
  }
  return out;
}

double measure_clock_offset(MPI_Comm comm, double (*clock)(), int rounds, double* error) {
  int rank = 0, size = 1;
  SL_MPI(MPI_Comm_rank(comm, &rank));
  SL_MPI(MPI_Comm_size(comm, &size));
  double offset = 0, bound = 0;
  // Rank 0 probes each rank in turn; the others answer its probes and then learn their result.
  for (int peer = 1; peer < size; ++peer) {
    if (rank == 0) {
      double best_rtt = INFINITY, best = 0;
      for (int i = 0; i < rounds; ++i) {
        double t = 0;
        const double t0 = clock();
        SL_MPI(MPI_Send(&t0, 1, MPI_DOUBLE, peer, 0, comm));
        SL_MPI(MPI_Recv(&t, 1, MPI_DOUBLE, peer, 0, comm, MPI_STATUS_IGNORE));
        const double t1 = clock();
        if (t1 - t0 < best_rtt) best_rtt = t1 - t0, best = t - (t0 + t1) / 2;
      }
      const double result[2] = {best, best_rtt / 2};
      SL_MPI(MPI_Send(result, 2, MPI_DOUBLE, peer, 1, comm));
    } else if (rank == peer) {
      for (int i = 0; i < rounds; ++i) {
        double probe = 0;
        SL_MPI(MPI_Recv(&probe, 1, MPI_DOUBLE, 0, 0, comm, MPI_STATUS_IGNORE));
        const double t = clock();
        SL_MPI(MPI_Send(&t, 1, MPI_DOUBLE, 0, 0, comm));
      }
      double result[2] = {0, 0};
      SL_MPI(MPI_Recv(result, 2, MPI_DOUBLE, 0, 1, comm, MPI_STATUS_IGNORE));
      offset = result[0], bound = result[1];
    }
  }
  if (error) *error = bound;
  return offset;
}

void CommTrace::align_clocks(MPI_Comm comm) { clock_offset_ = measure_clock_offset(comm, now, 16, &clock_error_); }

void CommTrace::write_chrome_trace(MPI_Comm comm, const std::string& path) const {
  int rank = 0, size = 1;
  SL_MPI(MPI_Comm_rank(comm, &rank));
  SL_MPI(MPI_Comm_size(comm, &size));
  const std::string mine = events_json(rank);
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(size), offsets(size);
  SL_MPI(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm));
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      offsets[r] = total;
      total += lengths[r];
    }
    all.resize(total);
  }
  SL_MPI(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm));
  std::string error;  // rank 0's, which every rank then raises
  if (rank == 0) {
    // Every fragment ends in ",\n"; drop the last comma to close a valid JSON array.
    if (all.size() >= 2) all.resize(all.size() - 2);
    try {
      write_file(path, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + all + "\n]}\n", "trace file");
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  raise_agreed_error(comm, error);
}

}  // namespace shardlab::parallel
