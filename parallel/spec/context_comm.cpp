#include "parallel/spec/context_comm.h"

#include "framework/error.h"

namespace shardlab::parallel {

ContextComm parse_context_comm(const std::string& name) {
  if (name == "ring") return ContextComm::kRing;
  if (name == "allgather" || name == "all_gather" || name == "all-gather") return ContextComm::kAllGather;
  throw UserError("context-parallel communication '" + name + "' is not known; use ring or allgather");
}

const char* context_comm_name(ContextComm comm) { return comm == ContextComm::kRing ? "ring" : "allgather"; }

}  // namespace shardlab::parallel
