// The four cases of a sharded matmul (book chapter "sharding", "Computation With Sharded
// Arrays"), side by side for X[B,D] . W[D,F] -> Y[B,F] over one mesh axis X of `shards` chips:
//
//   1  X[B_X, D] . W[D, F]     -> Y[B_X, F]        neither operand sharded on the contracting D:
//                                                   multiply the local shards, no communication
//   2  X[B, D_X] . W[D, F]     -> Y[B, F]          one operand sharded on D: AllGather_X it first
//                                                   (X, B D bytes), then every chip multiplies whole
//   3  X[B, D_X] . W[D_X, F]   -> Y[B, F]{U_X}     both sharded on D: multiply the shards, then
//                                                   AllReduce_X the partial sums (B F bytes; a
//                                                   ReduceScatter to Y[B_X, F] costs half)
//   4  X[B_X, D] . W[D, F_X]                       both non-contracting dims on the same axis:
//                                                   invalid as is; AllGather_X W (D F bytes), then case 1
//
// Collectives are priced by collective_cost (network/collective.h) on one axis of hw; FLOPs per chip
// at the matmul units' peak in the operands' compute dtype. time_lower = max(t_math, t_comms)
// (overlapped), time_upper = their sum (the collective before or after the multiply).
//
//   auto cases = sharded_matmul_cases({.b = 4096, .d = 8192, .f = 32768}, 4, hardware("tpu-v5e"));
//   cases[2].t_comms_s;   // the AllReduce of case 3 (= contraction_sharded_matmul's)
//   gather_or_reduce({.b = 4096, .d = 8192, .f = 32768}, 4, ShardedOperand::kWeight,
//                    hardware("tpu-v5p")).all_reduce_under_whole_math_d;   // 5100
#pragma once

#include <string>
#include <vector>

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {

struct MatmulCase {
  int number = 0;               // 1..4, the book's numbering
  std::string layout;           // e.g. "X[B, D_X] . W[D_X, F] -> Y[B, F]{U_X}"
  std::string action;           // what has to happen, in words
  bool communicates = false;    // false for case 1 only
  CollectiveOp op = CollectiveOp::kAllGather;  // when communicates
  std::string moved;            // the array the collective moves, e.g. "X[B, D]"
  double comm_bytes = 0;        // that array's global bytes
  double t_comms_s = 0;
  double flops_per_chip = 0;
  double t_math_s = 0;
  double time_lower_s = 0;      // max(t_math, t_comms)
  double time_upper_s = 0;      // t_math + t_comms
};

// UserError unless shards >= 2 and divides B, D and F (every case shards one of them).
std::vector<MatmulCase> sharded_matmul_cases(const MatmulSpec& m, int shards, const HardwareProfile& hw);

// Case 2 done two ways (sharding.md, Questions 4 and 9): one operand sharded on the
// contracting D, the other replicated, Y[B, F] wanted.
//   gather          AllGather_X the sharded operand, then every chip multiplies whole (the
//                   chapter's rule for case 2)
//   all_reduce      slice the replicated operand to the same D_X on each chip (no
//                   communication), multiply the shards (case 3), AllReduce_X Y[B, F]{U_X}
//   reduce_scatter  the same, ReduceScatter_X to Y[B_X, F] instead: half the AllReduce
// kWeight is Question 4's X[B, D] . W[D_X, F] (gather W[D, F]); kActivation is Question 9's
// X[B, D_X] . W[D, F] (gather X[B, D]: case 2 of sharded_matmul_cases).
//
// Where one overtakes the other, as a D: every time involved is either proportional to D
// (the multiplies, the gather of an operand with D in it) or free of it (the output's
// collectives), so each crossover is D x (free time) / (proportional time), on the
// collectives' bandwidth terms (latency aside, as the book reasons):
//   reduce_compute_bound_d         the shards' multiply covers the AllReduce above it (Q4:
//                                  D / 2X > C / W_ici, i.e. D > 2 X C / W_ici)
//   all_reduce_under_whole_math_d  the AllReduce takes less than the gather's whole-matrix
//                                  multiply above it (Q4: D > 2 C / W_ici, 5100 on a v5p)
//   all_reduce_moves_less_d        the AllReduce moves less than the gather above it (Q4: 4BF <
//                                  2DF, D > 2B; Q9: D > 2F)
//   reduce_scatter_moves_less_d    the same for the ReduceScatter (Q4: D > B; Q9: D > F, the
//                                  book's cost ratio M/K)
enum class ShardedOperand { kActivation, kWeight };

struct GatherOrReduce {
  ShardedOperand sharded = ShardedOperand::kWeight;
  std::string layout;  // e.g. "X[B, D] . W[D_X, F] -> Y[B, F]"
  MatmulCase gather, all_reduce, reduce_scatter;
  double reduce_compute_bound_d = 0;
  double all_reduce_under_whole_math_d = 0;
  double all_reduce_moves_less_d = 0;
  double reduce_scatter_moves_less_d = 0;
};

// UserError unless shards >= 2 and divides B and D (the ReduceScatter shards B).
GatherOrReduce gather_or_reduce(const MatmulSpec& m, int shards, ShardedOperand sharded, const HardwareProfile& hw);

}  // namespace shardlab::cost
