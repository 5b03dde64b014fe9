#include "parallel/comm/collective_types.h"

#include "framework/error.h"

namespace shardlab::parallel {

std::string to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kNative: return "native";
    case Algorithm::kRing: return "ring";
    case Algorithm::kBidir: return "bidir";
    case Algorithm::kTwoLevel: return "two_level";
    case Algorithm::kAuto: return "auto";
  }
  SL_ASSERT(false, "Algorithm value without a name");
}

std::string to_string(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "max"; }

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::kNative, Algorithm::kRing, Algorithm::kBidir, Algorithm::kTwoLevel, Algorithm::kAuto}) {
    if (name == to_string(a)) return a;
  }
  throw UserError("unknown algorithm '" + name + "'; choose one of: native, ring, bidir, two_level, auto");
}

}  // namespace shardlab::parallel
