// AlgorithmTable: what Algorithm::kAuto means, per op and message size.
//
// A short list of rules "op max_ranks max_bytes algorithm", tried in order; the first
// rule for the op whose max_ranks is at least the group size and whose max_bytes is at
// least the message size wins ("inf" = any). A collective no rule covers uses native, so
// group sizes nobody calibrated fall back to MPI. The best algorithm depends on the
// group size as much as on the message (8 ranks oversubscribed on 2 cores pay for every
// ring step in context switches), hence the ranks column. The built-in table was
// measured with examples/bench_collectives on this cluster for 2, 4 and 8 ranks
// (docs/collectives.md); `bench_collectives --calibrate FILE` adds the rules for the
// group size it runs on and AlgorithmTable::load reads the file back. One rule per line:
//   # op            max_ranks  max_bytes  algorithm
//   reduce_scatter  2          inf        ring
//   all_reduce      2          16777216   native
//   all_reduce      2          inf        ring
//
//   mesh.context().auto_table = AlgorithmTable::load("runs/auto.table");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/comm/collective_types.h"

namespace shardlab::parallel {

struct AutoRule {
  CollectiveOp op;
  int64_t max_ranks;  // inclusive group size; kAnySize for "inf"
  int64_t max_bytes;  // inclusive; kAnySize for "inf"
  Algorithm algorithm;
};

// One timing of one algorithm at one size (bench_collectives).
struct Measurement {
  CollectiveOp op;
  int64_t bytes;
  Algorithm algorithm;
  double seconds;
};

class AlgorithmTable {
 public:
  static constexpr int64_t kAnySize = INT64_MAX;

  // Rules for groups of n ranks from timings: per op and size the fastest algorithm,
  // where a neighbour algorithm must beat native by 10%, and some neighbour algorithm
  // must beat it at an adjacent size too (on shared cores a smaller lead, or a lead at
  // one size alone, is noise; native is the safe default); sizes with the same winner
  // merge into one rule, the last one "inf".
  static std::vector<AutoRule> rules_from(const std::vector<Measurement>& timings, int n);

  static AlgorithmTable builtin();
  // Throws UserError naming the file and line on a missing file or a malformed rule.
  static AlgorithmTable load(const std::string& path);
  void save(const std::string& path) const;

  explicit AlgorithmTable(std::vector<AutoRule> rules = {}) : rules_(std::move(rules)) {}
  Algorithm choose(CollectiveOp op, int group_size, int64_t bytes) const;  // never kAuto
  const std::vector<AutoRule>& rules() const { return rules_; }

 private:
  std::vector<AutoRule> rules_;
};

}  // namespace shardlab::parallel
