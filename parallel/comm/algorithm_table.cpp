#include "parallel/comm/algorithm_table.h"

#include <fstream>
#include <map>
#include <sstream>

#include "framework/error.h"

namespace shardlab::parallel {

AlgorithmTable AlgorithmTable::builtin() {
  // Measured on this cluster with bench_collectives (docs/collectives.md), smoothed over
  // the noise of shared cores. OpenMPI 4.1's MPI_Reduce_scatter_block (a reduce then a
  // scatter) is 3-30x slower than the neighbour ring once the ring's per-step cost is
  // paid back: from 8 KiB on 2 ranks, but only from 256 KiB on 4 and 8, whose n-1 ring
  // steps each cost context switches when oversubscribed on 2 cores. MPI_Allreduce falls
  // behind the ring past 16 MiB. Elsewhere, and for groups larger than 8, native.
  using enum CollectiveOp;
  return AlgorithmTable({
      {kReduceScatter, 2, 4096, Algorithm::kNative},
      {kReduceScatter, 2, kAnySize, Algorithm::kRing},
      {kAllReduce, 2, 16 << 20, Algorithm::kNative},
      {kAllReduce, 2, kAnySize, Algorithm::kRing},
      {kReduceScatter, 8, 128 << 10, Algorithm::kNative},
      {kReduceScatter, 8, kAnySize, Algorithm::kRing},
      {kAllReduce, 8, 16 << 20, Algorithm::kNative},
      {kAllReduce, 8, kAnySize, Algorithm::kRing},
  });
}

std::vector<AutoRule> AlgorithmTable::rules_from(const std::vector<Measurement>& timings, int n) {
  constexpr double kMargin = 1.1;
  // The winner per (op, size): native unless another algorithm is kMargin faster.
  std::map<std::pair<CollectiveOp, int64_t>, const Measurement*> best;
  for (const Measurement& m : timings) {
    if (m.algorithm == Algorithm::kAuto) continue;
    const Measurement*& b = best[{m.op, m.bytes}];
    const double margin = m.algorithm == Algorithm::kNative ? kMargin : b && b->algorithm == Algorithm::kNative ? 1 / kMargin : 1;
    if (!b || m.seconds < b->seconds * margin) b = &m;
  }
  // Per op, in size order; a neighbour algorithm winning at a size whose adjacent sizes
  // both went to native falls back to native (which neighbour algorithm wins, ring or
  // bidir, may alternate: the lead over native is what must repeat).
  std::map<CollectiveOp, std::vector<std::pair<int64_t, Algorithm>>> sizes;
  for (const auto& [key, m] : best) sizes[key.first].push_back({key.second, m->algorithm});
  std::vector<AutoRule> rules;
  for (auto& [op, measured] : sizes) {
    const auto& row = measured;  // (clang 14 cannot capture a structured binding)
    const auto beats_native = [&](size_t i) { return i < row.size() && row[i].second != Algorithm::kNative; };
    std::vector<Algorithm> chosen;
    for (size_t i = 0; i < row.size(); ++i) {
      const bool repeated = (i > 0 && beats_native(i - 1)) || beats_native(i + 1) || row.size() == 1;
      chosen.push_back(repeated ? row[i].second : Algorithm::kNative);
    }
    for (size_t i = 0; i < row.size(); ++i) {
      const bool last = i + 1 == row.size();
      if (!last && chosen[i + 1] == chosen[i]) continue;
      rules.push_back({op, n, last ? kAnySize : row[i].first, chosen[i]});
    }
  }
  return rules;
}

Algorithm AlgorithmTable::choose(CollectiveOp op, int group_size, int64_t bytes) const {
  for (const AutoRule& rule : rules_) {
    if (rule.op == op && group_size <= rule.max_ranks && bytes <= rule.max_bytes) return rule.algorithm;
  }
  return Algorithm::kNative;
}

AlgorithmTable AlgorithmTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot read auto algorithm table '" + path + "'; make one with bench_collectives --calibrate");
  std::vector<AutoRule> rules;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string op, ranks, size, algorithm, extra;
    if (!(fields >> op)) continue;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (!(fields >> ranks >> size >> algorithm) || (fields >> extra)) {
      throw UserError(where + "expected 'op max_ranks max_bytes algorithm', got '" + line + "'");
    }
    const auto limit = [&](const std::string& text, const char* what) {
      if (text == "inf") return kAnySize;
      size_t used = 0;
      int64_t value = -1;
      try {
        value = std::stoll(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != text.size() || value < 0) throw UserError(where + what + " '" + text + "' is not a count or 'inf'");
      return value;
    };
    AutoRule rule{parse_collective_op(op), limit(ranks, "max_ranks"), limit(size, "max_bytes"), parse_algorithm(algorithm)};
    if (rule.algorithm == Algorithm::kAuto) throw UserError(where + "a rule cannot choose 'auto'");
    rules.push_back(rule);
  }
  return AlgorithmTable(std::move(rules));
}

void AlgorithmTable::save(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw UserError("cannot write auto algorithm table '" + path + "'");
  out << "# shardlab auto algorithm table: first matching rule wins (docs/collectives.md)\n"
      << "# op max_ranks max_bytes algorithm\n";
  const auto limit = [](int64_t v) { return v == kAnySize ? std::string("inf") : std::to_string(v); };
  for (const AutoRule& r : rules_) {
    out << to_string(r.op) << " " << limit(r.max_ranks) << " " << limit(r.max_bytes) << " " << to_string(r.algorithm) << "\n";
  }
}

}  // namespace shardlab::parallel
