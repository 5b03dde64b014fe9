// CollectiveOp: which collective. The runtime's communication layer runs all seven
// (parallel/comm/collectives.h); the cost model prices the first four
// (parallel/cost/network/collective.h). Neither owns it: it sits here, without MPI, and the
// `cost` library compiles it so that the planner still runs without MPI.
//
//   CollectiveOp op = parse_collective_op("all-gather");  // kAllGather; UserError if unknown
//   std::string s = to_string(CollectiveOp::kAllReduce);  // "all_reduce"
#pragma once

#include <string>

namespace shardlab::parallel {

enum class CollectiveOp { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kPermute, kSend, kRecv };

// The spelling used on command lines, in trace files and in the auto calibration table:
// all_gather, reduce_scatter, all_reduce, all_to_all, ppermute, send, recv.
std::string to_string(CollectiveOp op);
// Any of those spellings, ignoring case, '_' and '-' ("AllGather", "all-gather");
// throws UserError listing the known names.
CollectiveOp parse_collective_op(const std::string& name);

}  // namespace shardlab::parallel
