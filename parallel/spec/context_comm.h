// How attention reaches the other context ranks' keys and values (parallel/context, and
// the cost model's pricing of it, cost/training/context_attention.h): the one spelling of
// train_gpt's and shardlab-plan's --cp-comm. No MPI here: the `cost` library compiles it too.
#pragma once

#include <string>

namespace shardlab::parallel {

enum class ContextComm {
  kRing,       // K/V blocks passed round the axis while attention computes
  kAllGather,  // every block all_gathered at once (LLaMA 3's choice)
};
// "ring" or "allgather" (also "all_gather", "all-gather"); UserError naming both otherwise.
ContextComm parse_context_comm(const std::string& name);
const char* context_comm_name(ContextComm comm);  // "ring", "allgather"

}  // namespace shardlab::parallel
