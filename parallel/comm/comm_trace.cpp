#include "parallel/comm/comm_trace.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "framework/error.h"
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

// Events of one rank as comma-separated JSON objects, times in microseconds.
std::string CommTrace::events_json(int rank) const {
  std::map<std::string, int> lanes;  // group -> tid; 0 is compute
  for (const CommRecord& r : events_) lanes.emplace(r.group, 0);
  int next = 1;
  for (auto& [group, tid] : lanes) tid = next++;

  std::ostringstream out;
  out.precision(15);
  auto meta = [&](int tid, const std::string& name) {
    out << R"({"name":"thread_name","ph":"M","pid":)" << rank << R"(,"tid":)" << tid << R"(,"args":{"name":")"
        << name << "\"}},\n";
  };
  out << R"({"name":"process_name","ph":"M","pid":)" << rank << R"(,"args":{"name":"rank )" << rank << "\"}},\n";
  meta(0, "compute");
  for (const auto& [group, tid] : lanes) meta(tid, "axis " + group);
  for (const ComputeEvent& c : compute_) {
    out << R"({"name":")" << c.name << R"(","cat":"compute","ph":"X","pid":)" << rank << R"(,"tid":0,"ts":)"
        << c.start * 1e6 << R"(,"dur":)" << (c.end - c.start) * 1e6 << "},\n";
  }
  for (const CommRecord& r : events_) {
    out << R"({"name":")" << to_string(r.op) << R"(","cat":"comm","ph":"X","pid":)" << rank << R"(,"tid":)"
        << lanes[r.group] << R"(,"ts":)" << r.start * 1e6 << R"(,"dur":)" << (r.end - r.start) * 1e6
        << R"(,"args":{"axis":")" << r.group << R"(","algorithm":")" << to_string(r.algorithm)
        << R"(","bytes":)" << r.bytes << R"(,"group_size":)" << r.group_size << R"(,"emulated_us":)"
        << r.emulated * 1e6 << R"(,"predicted_us":)" << r.predicted * 1e6 << "}},\n";
  }
  return out.str();
}

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
  if (rank != 0) return;
  // Every fragment ends in ",\n"; drop the last comma to close a valid JSON array.
  if (all.size() >= 2) all.resize(all.size() - 2);
  std::ofstream out(path);
  if (!out) throw UserError("cannot write trace file '" + path + "'; check that its directory exists");
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" << all << "\n]}\n";
}

}  // namespace shardlab::parallel
