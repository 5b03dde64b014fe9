#include "parallel/comm/collective_types.h"

#include <array>
#include <utility>

#include "framework/error.h"

namespace shardlab::parallel {
namespace {

constexpr std::array<std::pair<CollectiveOp, const char*>, 7> kOpNames{{
    {CollectiveOp::kAllGather, "all_gather"},
    {CollectiveOp::kReduceScatter, "reduce_scatter"},
    {CollectiveOp::kAllReduce, "all_reduce"},
    {CollectiveOp::kAllToAll, "all_to_all"},
    {CollectiveOp::kPermute, "ppermute"},
    {CollectiveOp::kSend, "send"},
    {CollectiveOp::kRecv, "recv"},
}};

constexpr std::array<std::pair<Algorithm, const char*>, 4> kAlgorithmNames{{
    {Algorithm::kNative, "native"},
    {Algorithm::kRing, "ring"},
    {Algorithm::kBidir, "bidir"},
    {Algorithm::kAuto, "auto"},
}};

template <typename Table, typename Key>
std::string name_of(const Table& table, Key key) {
  for (const auto& [k, name] : table) {
    if (k == key) return name;
  }
  SL_ASSERT(false, "enum value missing from its name table");
}

template <typename Table>
auto value_of(const Table& table, const std::string& name, const char* what) {
  std::string known;
  for (const auto& [k, n] : table) {
    if (name == n) return k;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  throw UserError("unknown " + std::string(what) + " '" + name + "'; choose one of: " + known);
}

}  // namespace

std::string to_string(CollectiveOp op) { return name_of(kOpNames, op); }
std::string to_string(Algorithm algorithm) { return name_of(kAlgorithmNames, algorithm); }
std::string to_string(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "max"; }

CollectiveOp parse_collective_op(const std::string& name) { return value_of(kOpNames, name, "collective"); }
Algorithm parse_algorithm(const std::string& name) { return value_of(kAlgorithmNames, name, "algorithm"); }

}  // namespace shardlab::parallel
