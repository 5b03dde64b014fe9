#include "parallel/cost/sharding/matmul_cases.h"

#include <algorithm>
#include <utility>

#include "framework/error.h"
#include "parallel/cost/network/collective.h"

namespace shardlab::cost {

std::vector<MatmulCase> sharded_matmul_cases(const MatmulSpec& m, int shards, const HardwareProfile& hw) {
  if (m.b < 1 || m.d < 1 || m.f < 1)
    throw UserError("matmul --cases needs B, D and F >= 1 (got B=" + std::to_string(m.b) +
                    " D=" + std::to_string(m.d) + " F=" + std::to_string(m.f) + ")");
  if (shards < 2 || m.b % shards || m.d % shards || m.f % shards)
    throw UserError("matmul --cases " + std::to_string(shards) + ": the axis must have >= 2 chips and divide B=" +
                    std::to_string(m.b) + ", D=" + std::to_string(m.d) + " and F=" + std::to_string(m.f) +
                    " (each case shards one of them); choose e.g. --cases 4");
  const double peak = peak_flops(hw, compute_dtype(m.x, m.w));
  const double whole = 2.0 * m.b * m.d * m.f;
  auto make = [&](int number, std::string layout, std::string action, double flops) {
    MatmulCase c;
    c.number = number, c.layout = std::move(layout), c.action = std::move(action);
    c.flops_per_chip = flops;
    c.t_math_s = flops / peak;
    return c;
  };
  auto communicate = [&](MatmulCase& c, CollectiveOp op, std::string moved, double bytes) {
    c.communicates = true, c.op = op, c.moved = std::move(moved), c.comm_bytes = bytes;
    c.t_comms_s = collective_cost(op, bytes, {shards}, hw).seconds;
  };
  std::vector<MatmulCase> cases;
  cases.push_back(make(1, "X[B_X, D] . W[D, F] -> Y[B_X, F]", "multiply the local shards", whole / shards));
  cases.push_back(make(2, "X[B, D_X] . W[D, F] -> Y[B, F]", "AllGather X over D, then multiply whole", whole));
  communicate(cases.back(), CollectiveOp::kAllGather, "X[B, D]", static_cast<double>(m.b) * m.d * bytes_of(m.x));
  cases.push_back(make(3, "X[B, D_X] . W[D_X, F] -> Y[B, F]{U_X}", "multiply the shards, AllReduce the partial sums",
                       whole / shards));
  communicate(cases.back(), CollectiveOp::kAllReduce, "Y[B, F]", static_cast<double>(m.b) * m.f * bytes_of(m.out));
  cases.push_back(make(4, "X[B_X, D] . W[D, F_X] (invalid)", "AllGather W over F, then case 1", whole / shards));
  communicate(cases.back(), CollectiveOp::kAllGather, "W[D, F]", static_cast<double>(m.d) * m.f * bytes_of(m.w));
  for (MatmulCase& c : cases) {
    c.time_lower_s = std::max(c.t_math_s, c.t_comms_s);
    c.time_upper_s = c.t_math_s + c.t_comms_s;
  }
  return cases;
}

}  // namespace shardlab::cost
