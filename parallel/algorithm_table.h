// AlgorithmTable: what Algorithm::kAuto means, per op and message size.
//
// A short list of rules "op max_bytes algorithm", tried in order; the first rule for the
// op whose max_bytes is at least the message size wins ("inf" = any size). Ops without a
// rule use native. The built-in table was measured with examples/bench_collectives on
// this cluster (docs/collectives.md); `bench_collectives --calibrate FILE` measures a
// new one and AlgorithmTable::load reads it back. File format, one rule per line:
//   # op            max_bytes  algorithm
//   all_reduce      4194304    native
//   all_reduce      inf        ring
//   reduce_scatter  inf        ring
//
//   mesh.context().auto_table = AlgorithmTable::load("runs/auto.table");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/collective_types.h"

namespace shardlab::parallel {

struct AutoRule {
  CollectiveOp op;
  int64_t max_bytes;  // inclusive; kAnySize for "inf"
  Algorithm algorithm;
};

class AlgorithmTable {
 public:
  static constexpr int64_t kAnySize = INT64_MAX;

  static AlgorithmTable builtin();
  // Throws UserError naming the file and line on a missing file or a malformed rule.
  static AlgorithmTable load(const std::string& path);
  void save(const std::string& path) const;

  explicit AlgorithmTable(std::vector<AutoRule> rules = {}) : rules_(std::move(rules)) {}
  Algorithm choose(CollectiveOp op, int64_t bytes) const;  // never kAuto
  const std::vector<AutoRule>& rules() const { return rules_; }

 private:
  std::vector<AutoRule> rules_;
};

}  // namespace shardlab::parallel
