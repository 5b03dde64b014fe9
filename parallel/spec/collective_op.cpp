#include "parallel/spec/collective_op.h"

#include <cctype>

#include "framework/error.h"

namespace shardlab::parallel {
namespace {

// "All-Gather" -> "allgather": the spellings a user may type compare equal.
std::string fold(const std::string& name) {
  std::string key;
  for (char c : name)
    if (c != '_' && c != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

}  // namespace

std::string to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kAllToAll: return "all_to_all";
    case CollectiveOp::kPermute: return "ppermute";
    case CollectiveOp::kSend: return "send";
    case CollectiveOp::kRecv: return "recv";
  }
  SL_ASSERT(false, "CollectiveOp value without a name");
}

CollectiveOp parse_collective_op(const std::string& name) {
  using enum CollectiveOp;
  for (CollectiveOp op : {kAllGather, kReduceScatter, kAllReduce, kAllToAll, kPermute, kSend, kRecv}) {
    if (fold(name) == fold(to_string(op))) return op;
  }
  throw UserError("unknown collective '" + name +
                  "'; choose one of: all_gather, reduce_scatter, all_reduce, all_to_all, ppermute, send, recv");
}

}  // namespace shardlab::parallel
