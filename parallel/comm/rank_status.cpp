#include "parallel/comm/rank_status.h"

#include <cstdio>
#include <cstring>

namespace shardlab::parallel {
namespace {

std::string collective(int op, const char* axis, int64_t bytes) {
  return to_string(static_cast<CollectiveOp>(op)) + " over '" + axis + "' (" + std::to_string(bytes) + " bytes)";
}

bool same_collective(const RankStatus& a, const RankStatus& b) {
  return a.waiting && b.waiting && a.op == b.op && std::strcmp(a.axis, b.axis) == 0;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

void RankStatus::set_name(char (&field)[64], const std::string& name) {
  std::memset(field, 0, sizeof field);
  std::memcpy(field, name.data(), std::min(name.size(), sizeof field - 1));
}

std::string RankStatus::describe() const {
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f s", waited_seconds);
  std::string s = waiting ? "waits in " + collective(op, axis, bytes) + " for " + waited : "waits in no collective";
  s += ", after " + std::to_string(completed) + " completed collectives";
  if (has_last) s += ", the last a " + collective(last_op, last_axis, last_bytes);
  return s;
}

std::string describe_job(const std::vector<std::optional<RankStatus>>& answers, int me) {
  const RankStatus& mine = *answers[me];
  std::vector<int> silent, idle, elsewhere;
  for (int r = 0; r < static_cast<int>(answers.size()); ++r) {
    if (!answers[r]) silent.push_back(r);
    else if (!answers[r]->waiting) idle.push_back(r);
    else if (!same_collective(*answers[r], mine)) elsewhere.push_back(r);
  }
  std::string s;
  const std::string prefix = "rank " + std::to_string(me) + ": watchdog: ";
  if (!silent.empty()) {
    s += prefix + "missing: rank " + rank_list(silent) +
         " did not answer (stopped, dead or cut off; its watchdog is silent)\n";
  }
  if (!idle.empty()) {
    s += prefix + "missing: rank " + rank_list(idle) +
         " answered but waits in no collective (it fell behind, or hangs outside communication)\n";
  }
  if (!elsewhere.empty()) {
    s += prefix + "rank " + rank_list(elsewhere) +
         " waits in a different collective: the ranks issued mismatched collectives\n";
  }
  if (silent.empty() && idle.empty() && elsewhere.empty()) {
    s += prefix + "every rank answered and waits in this same collective; a group it spans may be cut off\n";
  }
  for (int r = 0; r < static_cast<int>(answers.size()); ++r) {
    s += prefix + "  rank " + std::to_string(r) + ": " + (answers[r] ? answers[r]->describe() : "no answer") + "\n";
  }
  return s;
}

}  // namespace shardlab::parallel
