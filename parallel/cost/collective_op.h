// CollectiveOp: which collective. One enum for the cost model, which prices the first four
// (network/collective.h), and for the communication layer, which also runs ppermute, send and recv
// (parallel/comm, where it is parallel::CollectiveOp). No MPI here, so the `cost` library
// compiles it and the planner still runs without MPI.
//
//   CollectiveOp op = parse_collective_op("all-gather");  // kAllGather; UserError if unknown
//   std::string s = to_string(CollectiveOp::kAllReduce);  // "all_reduce"
#pragma once

#include <string>

namespace shardlab::cost {

enum class CollectiveOp { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kPermute, kSend, kRecv };

// The spelling used on command lines, in trace files and in the auto calibration table:
// all_gather, reduce_scatter, all_reduce, all_to_all, ppermute, send, recv.
std::string to_string(CollectiveOp op);
// Any of those spellings, ignoring case, '_' and '-' ("AllGather", "all-gather");
// throws UserError listing the known names.
CollectiveOp parse_collective_op(const std::string& name);

}  // namespace shardlab::cost
