#include "parallel/comm/step_plan.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "framework/error.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/mesh.h"

namespace shardlab::parallel {
namespace {

// Every rank's strings, concatenated in rank order with '\n' after each.
std::vector<std::string> all_gather_strings(MPI_Comm comm, const std::string& mine) {
  int size = 0;
  SL_MPI(MPI_Comm_size(comm, &size));
  const int length = mpi_count(static_cast<int64_t>(mine.size()));
  std::vector<int> lengths(size), offsets(size);
  SL_MPI(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  int64_t total = 0;
  for (int r = 0; r < size; ++r) offsets[r] = mpi_count(std::exchange(total, total + lengths[r]));
  std::string all(static_cast<size_t>(total), '\0');
  SL_MPI(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.push_back(all.substr(offsets[r], lengths[r]));
  return out;
}

std::string describe_entry(CollectiveOp op, int64_t bytes) {
  return to_string(op) + " of " + std::to_string(bytes) + " B";
}

// Rank `from`'s string on every rank of comm.
std::string broadcast_string(MPI_Comm comm, int from, std::string s) {
  int length = mpi_count(static_cast<int64_t>(s.size()));
  SL_MPI(MPI_Bcast(&length, 1, MPI_INT, from, comm));
  s.resize(static_cast<size_t>(length));
  SL_MPI(MPI_Bcast(s.data(), length, MPI_CHAR, from, comm));
  return s;
}

}  // namespace

void add_planned(StepPlan& plan, const Mesh& mesh, PlannedCollective entry) {
  if (mesh.group_named(entry.group).size() > 1) plan.push_back(std::move(entry));
}

void check_plan_agreement(const Mesh& mesh, const StepPlan& plan) {
  // The groups any rank plans on, the same sorted list everywhere.
  std::string mine;
  for (const PlannedCollective& p : plan) mine += p.group + "\n";
  std::set<std::string> groups;
  for (const std::string& text : all_gather_strings(mesh.comm(), mine)) {
    std::stringstream in(text);
    for (std::string name; std::getline(in, name);) groups.insert(name);
  }
  for (const std::string& name : groups) {
    const AxisGroup& g = mesh.group_named(name);
    // This rank's (op, bytes) sequence on g against the one of g's first rank.
    std::vector<int64_t> seq;
    std::vector<const PlannedCollective*> entries;
    for (const PlannedCollective& p : plan) {
      if (p.group != name) continue;
      seq.push_back(static_cast<int64_t>(p.op));
      seq.push_back(p.bytes);
      entries.push_back(&p);
    }
    int64_t first_length = static_cast<int64_t>(seq.size());
    SL_MPI(MPI_Bcast(&first_length, 1, MPI_INT64_T, 0, g.comm()));
    std::vector<int64_t> first = g.rank() == 0 ? seq : std::vector<int64_t>(static_cast<size_t>(first_length));
    SL_MPI(MPI_Bcast(first.data(), mpi_count(first_length), MPI_INT64_T, 0, g.comm()));
    const size_t common = std::min(seq.size(), first.size());
    size_t differ = common;
    for (size_t i = 0; i < common; ++i) {
      if (seq[i] != first[i]) {
        differ = i;
        break;
      }
    }
    const bool agrees = differ == common && seq.size() == first.size();
    const size_t index = differ / 2;  // the entry, not the field
    // The earliest disagreeing entry over the whole mesh, and the rank that saw it.
    struct {
      int index;
      int rank;
    } local{agrees ? INT_MAX : static_cast<int>(index), mesh.rank()}, worst{};
    SL_MPI(MPI_Allreduce(&local, &worst, 1, MPI_2INT, MPI_MINLOC, mesh.comm()));
    if (worst.index == INT_MAX) continue;
    std::string message;
    if (mesh.rank() == worst.rank) {
      const auto entry_at = [](const std::vector<int64_t>& s, size_t i) {
        return 2 * i + 1 < s.size() ? describe_entry(static_cast<CollectiveOp>(s[2 * i]), s[2 * i + 1])
                                    : std::string("nothing (its plan ends there)");
      };
      message = "ranks disagree about the collectives of group '" + name + "' -- a job that ran would hang: entry " +
                std::to_string(index) + " of the step is " + entry_at(seq, index) +
                (index < entries.size() ? " (" + entries[index]->what + ")" : "") + " on mesh rank " +
                std::to_string(mesh.rank()) + " but " + entry_at(first, index) + " on the group's first rank";
    }
    throw UserError(broadcast_string(mesh.comm(), worst.rank, message));
  }
}

double planned_seconds(const Mesh& mesh, const PlannedCollective& p) {
  return mesh.context().links.predict_seconds(p.op, Algorithm::kNative, mesh.group_named(p.group), p.bytes);
}

std::map<std::string, double> planned_seconds_by_group(const Mesh& mesh, const StepPlan& plan) {
  std::map<std::string, double> seconds;
  for (const PlannedCollective& p : plan) seconds[p.group] += planned_seconds(mesh, p);
  return seconds;
}

namespace {

// What the transfers of one phase (forward or backward) leave exposed past its end. Each
// is issued at a point of the phase in proportion to the phase's bytes before it -- a
// gather before the compute it feeds, a reduction after the compute that produced it --
// and the links carry one transfer at a time (as link emulation's delay mode does).
struct PhaseTransfer {
  double seconds;
  double bytes;
  bool gather;
};
double overhang(const std::vector<PhaseTransfer>& transfers, double phase_seconds) {
  double total = 0;
  for (const PhaseTransfer& t : transfers) total += t.bytes;
  double done = 0, free = 0;
  for (const PhaseTransfer& t : transfers) {
    const double release = total > 0 ? phase_seconds * (t.gather ? done : done + t.bytes) / total : 0.0;
    done += t.bytes;
    free = std::max(free, release) + t.seconds;
  }
  return std::max(0.0, free - phase_seconds);
}

}  // namespace

double planned_exposed_seconds(const Mesh& mesh, const StepPlan& plan, const std::set<std::string>& groups,
                               double forward_seconds, double backward_seconds, bool overlap) {
  double alone = 0;
  std::vector<PhaseTransfer> forward, backward;
  for (const PlannedCollective& p : plan) {
    if (!groups.contains(p.group)) continue;
    const PhaseTransfer t{planned_seconds(mesh, p), static_cast<double>(p.bytes), p.op == CollectiveOp::kAllGather};
    if (!overlap || p.hides == Hides::kNothing) alone += t.seconds;
    else (p.hides == Hides::kForward ? forward : backward).push_back(t);
  }
  return alone + overhang(forward, forward_seconds) + overhang(backward, backward_seconds);
}

double planned_seconds(const Mesh& mesh, const StepPlan& plan) {
  double total = 0;
  for (const auto& [group, seconds] : planned_seconds_by_group(mesh, plan)) total += seconds;
  return total;
}

std::string format_plan(const Mesh& mesh, const StepPlan& plan) {
  const LinkEmulation& links = mesh.context().links;
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%4s  %-12s %-15s %14s %14s  %s\n", "#", "group", "op", "bytes", "predicted_us",
                "what");
  out += line;
  struct Totals {
    int count = 0;
    int64_t bytes = 0;
    double seconds = 0;
  };
  std::map<std::string, Totals> totals;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedCollective& p = plan[i];
    const double s = links.predict_seconds(p.op, Algorithm::kNative, mesh.group_named(p.group), p.bytes);
    std::snprintf(line, sizeof line, "%4zu  %-12s %-15s %14lld %14.1f  %s\n", i, p.group.c_str(),
                  to_string(p.op).c_str(), static_cast<long long>(p.bytes), s * 1e6, p.what.c_str());
    out += line;
    Totals& t = totals[p.group];
    ++t.count;
    t.bytes += p.bytes;
    t.seconds += s;
  }
  for (const auto& [group, t] : totals) {
    std::snprintf(line, sizeof line, "total on %-12s %4d collectives %12.2f MiB %10.3f ms predicted (%s links x%g)\n",
                  group.c_str(), t.count, t.bytes / 1048576.0, t.seconds * 1e3, links.profile_name().c_str(),
                  links.link_scale());
    out += line;
  }
  return out;
}

}  // namespace shardlab::parallel
