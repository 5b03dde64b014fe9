// RankStatus: what a rank's watchdog tells the others when a collective hangs -- whether
// its main thread waits in a collective (which, how long), and how many it has completed,
// the last of them -- and the reading of the whole job's answers: which ranks are
// missing from the collective.
//
// The watchdog threads exchange them over their own communicator (watchdog.h); a rank
// whose watchdog does not answer within the grace period is stopped, dead or cut off.
//
//   std::vector<std::optional<RankStatus>> answers = ...;   // nullopt: no answer
//   std::fprintf(stderr, "%s", describe_job(answers, me).c_str());
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/comm/collective_types.h"

namespace shardlab::parallel {

struct RankStatus {
  int64_t completed = 0;    // collectives this rank has finished waiting for
  int32_t waiting = 0;      // 1: its main thread waits in a collective now
  int32_t op = 0;           // CollectiveOp of that wait
  int64_t bytes = 0;
  double waited_seconds = 0;
  int32_t has_last = 0;     // 1: the last_* fields name its last completed collective
  int32_t last_op = 0;
  int64_t last_bytes = 0;
  char axis[64] = {};       // the waited-for collective's group
  char last_axis[64] = {};

  // Copies a group name into `axis` or `last_axis`, cut to fit.
  static void set_name(char (&field)[64], const std::string& name);
  // "waits in all_reduce over 'data' (4096 bytes) for 3.1 s, after 1412 collectives, the last an all_gather over 'data' (...)"
  std::string describe() const;
};

// The job's answers, one per rank of the mesh (nullopt: did not answer), as a report:
// first the ranks missing from the collective `me` waits in -- those that did not answer,
// or answered but wait in no collective (they fell behind), or wait in another one -- then
// every rank's state. Names the ranks; never empty.
std::string describe_job(const std::vector<std::optional<RankStatus>>& answers, int me);

}  // namespace shardlab::parallel
