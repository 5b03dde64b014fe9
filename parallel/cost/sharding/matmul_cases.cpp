#include "parallel/cost/sharding/matmul_cases.h"

#include <algorithm>
#include <utility>

#include "framework/error.h"
#include "parallel/cost/network/collective.h"

namespace shardlab::cost {

namespace {

MatmulCase make_case(int number, std::string layout, std::string action, double flops, double peak) {
  MatmulCase c;
  c.number = number, c.layout = std::move(layout), c.action = std::move(action);
  c.flops_per_chip = flops;
  c.t_math_s = flops / peak;
  return c;
}

// Adds the collective to c and returns its cost (its bandwidth term for the crossovers).
CollectiveCost communicate(MatmulCase& c, CollectiveOp op, std::string moved, double bytes, int shards,
                           const HardwareProfile& hw) {
  const CollectiveCost cost = collective_cost(op, bytes, {shards}, hw);
  c.communicates = true, c.op = op, c.moved = std::move(moved), c.comm_bytes = bytes;
  c.t_comms_s = cost.seconds;
  c.time_lower_s = std::max(c.t_math_s, c.t_comms_s);
  c.time_upper_s = c.t_math_s + c.t_comms_s;
  return cost;
}

void check_dims(const MatmulSpec& m, const char* flag) {
  if (m.b < 1 || m.d < 1 || m.f < 1)
    throw UserError(std::string("matmul ") + flag + " needs B, D and F >= 1 (got B=" + std::to_string(m.b) +
                    " D=" + std::to_string(m.d) + " F=" + std::to_string(m.f) + ")");
}

}  // namespace

std::vector<MatmulCase> sharded_matmul_cases(const MatmulSpec& m, int shards, const HardwareProfile& hw) {
  check_dims(m, "--cases");
  if (shards < 2 || m.b % shards || m.d % shards || m.f % shards)
    throw UserError("matmul --cases " + std::to_string(shards) + ": the axis must have >= 2 chips and divide B=" +
                    std::to_string(m.b) + ", D=" + std::to_string(m.d) + " and F=" + std::to_string(m.f) +
                    " (each case shards one of them); choose e.g. --cases 4");
  const double peak = peak_flops(hw, compute_dtype(m.x, m.w));
  const double whole = 2.0 * m.b * m.d * m.f;
  std::vector<MatmulCase> cases;
  cases.push_back(make_case(1, "X[B_X, D] . W[D, F] -> Y[B_X, F]", "multiply the local shards", whole / shards, peak));
  cases.back().time_lower_s = cases.back().time_upper_s = cases.back().t_math_s;
  cases.push_back(make_case(2, "X[B, D_X] . W[D, F] -> Y[B, F]", "AllGather X over D, then multiply whole", whole, peak));
  communicate(cases.back(), CollectiveOp::kAllGather, "X[B, D]", static_cast<double>(m.b) * m.d * bytes_of(m.x),
              shards, hw);
  cases.push_back(make_case(3, "X[B, D_X] . W[D_X, F] -> Y[B, F]{U_X}", "multiply the shards, AllReduce the partial sums",
                            whole / shards, peak));
  communicate(cases.back(), CollectiveOp::kAllReduce, "Y[B, F]", static_cast<double>(m.b) * m.f * bytes_of(m.out),
              shards, hw);
  cases.push_back(make_case(4, "X[B_X, D] . W[D, F_X] (invalid)", "AllGather W over F, then case 1", whole / shards, peak));
  communicate(cases.back(), CollectiveOp::kAllGather, "W[D, F]", static_cast<double>(m.d) * m.f * bytes_of(m.w),
              shards, hw);
  return cases;
}

GatherOrReduce gather_or_reduce(const MatmulSpec& m, int shards, ShardedOperand sharded, const HardwareProfile& hw) {
  check_dims(m, "--gather-or-reduce");
  if (shards < 2 || m.b % shards || m.d % shards)
    throw UserError("matmul --gather-or-reduce " + std::to_string(shards) +
                    ": the axis must have >= 2 chips and divide B=" + std::to_string(m.b) + " and D=" +
                    std::to_string(m.d) + " (D is sharded, the ReduceScatter shards B); choose e.g. 4");
  const bool weight = sharded == ShardedOperand::kWeight;
  const double peak = peak_flops(hw, compute_dtype(m.x, m.w));
  const double whole = 2.0 * m.b * m.d * m.f;
  const double y_bytes = static_cast<double>(m.b) * m.f * bytes_of(m.out);
  GatherOrReduce g;
  g.sharded = sharded;
  g.layout = weight ? "X[B, D] . W[D_X, F] -> Y[B, F]" : "X[B, D_X] . W[D, F] -> Y[B, F]";
  g.gather = make_case(2, g.layout, std::string("AllGather ") + (weight ? "W" : "X") + " over D, then multiply whole",
                       whole, peak);
  const CollectiveCost gathered =
      weight ? communicate(g.gather, CollectiveOp::kAllGather, "W[D, F]", static_cast<double>(m.d) * m.f * bytes_of(m.w),
                           shards, hw)
             : communicate(g.gather, CollectiveOp::kAllGather, "X[B, D]", static_cast<double>(m.b) * m.d * bytes_of(m.x),
                           shards, hw);
  const std::string slice = weight ? "slice X to X[B, D_X] here" : "slice W to W[D_X, F] here";
  g.all_reduce = make_case(3, "X[B, D_X] . W[D_X, F] -> Y[B, F]{U_X} -> Y[B, F]",
                           slice + ", multiply the shards, AllReduce the partial sums", whole / shards, peak);
  const CollectiveCost reduced = communicate(g.all_reduce, CollectiveOp::kAllReduce, "Y[B, F]", y_bytes, shards, hw);
  g.reduce_scatter = make_case(3, "X[B, D_X] . W[D_X, F] -> Y[B, F]{U_X} -> Y[B_X, F]",
                               slice + ", multiply the shards, ReduceScatter the partial sums", whole / shards, peak);
  const CollectiveCost scattered =
      communicate(g.reduce_scatter, CollectiveOp::kReduceScatter, "Y[B, F]", y_bytes, shards, hw);
  const double d = static_cast<double>(m.d);
  g.reduce_compute_bound_d = d * reduced.bandwidth_seconds / g.all_reduce.t_math_s;
  g.all_reduce_under_whole_math_d = d * reduced.bandwidth_seconds / g.gather.t_math_s;
  g.all_reduce_moves_less_d = d * reduced.bandwidth_seconds / gathered.bandwidth_seconds;
  g.reduce_scatter_moves_less_d = d * scattered.bandwidth_seconds / gathered.bandwidth_seconds;
  return g;
}

}  // namespace shardlab::cost
