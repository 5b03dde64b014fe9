// Names shared by the collectives, the link model, the trace and the auto table:
// which collective (CollectiveOp, shared with the cost model: parallel/spec/collective_op.h),
// how it is carried out (Algorithm), and how values combine (ReduceOp). Each converts to
// and from the spelling used on command lines, in trace files and in the auto calibration
// table ("all_gather", "bidir", "max").
//
//   Algorithm a = parse_algorithm("ring");   // throws UserError on an unknown name
//   std::string s = to_string(CollectiveOp::kAllReduce);   // "all_reduce"
#pragma once

#include <cstdint>
#include <string>

#include "parallel/spec/collective_op.h"

namespace shardlab::parallel {

inline constexpr int64_t kBytesPerFloat = sizeof(float);  // every collective moves fp32

// native: MPI's own collective on the axis communicator.
// ring:   neighbour-only, one direction round the ring (a line without wraparound).
// bidir:  data split in halves going both ways round the ring (a line without wraparound).
// two_level: all_reduce in three phases over the hosts the group spans -- in the host,
//         across hosts, in the host (two_level.h); on a group that does not span several
//         hosts with the same ranks on each, and for the other ops, it runs native.
// auto:   the fastest for this op and message size (see algorithm_table.h), two_level
//         for an all_reduce of kTwoLevelMinBytes or more on a group that spans hosts.
enum class Algorithm { kNative, kRing, kBidir, kTwoLevel, kAuto };

enum class ReduceOp { kSum, kMax };

std::string to_string(Algorithm algorithm);
std::string to_string(ReduceOp op);

Algorithm parse_algorithm(const std::string& name);

}  // namespace shardlab::parallel
