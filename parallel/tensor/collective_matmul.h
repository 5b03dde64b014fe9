// The book's collective matmul (the sharded-matrices chapter): an all_gather followed by
// a matmul, decomposed so that the communication hides behind the compute. Each rank of
// the tensor axis holds rows x_r of X; instead of gathering X and then multiplying, the
// chunks travel round the ring one neighbour step at a time (ppermute), and each step's
// transfer overlaps the matmul of the chunk that has already arrived:
//
//   step s = 0 .. t-1:  start sending the chunk held to rank r+1 (receiving from r-1),
//                       y[chunk (r - s) mod t] = chunk · W^T + b,  wait
//
// t-1 ppermutes of |x_r| floats replace the all_gather (the same bytes). Backward is the
// all_gather + matmul's: dX = reduce_scatter(dY · W), dW = dY^T X, db = sum of dY rows.
//
//   Tensor qkv = all_gather_linear(tp, x_shard, wqkv_shard, bias_shard);  // x_shard [B/t, T, D]
#pragma once

#include "framework/precision.h"
#include "framework/tensor.h"
#include "parallel/comm/mesh.h"

namespace shardlab::parallel {

// x [b, ...rest, D] on each rank (its rows of the dim-0 concatenation over the axis), w
// [O, D], b [O] or undefined -> [t*b, ...rest, O], equal to ops::linear(gathered x, w, b).
// `wire`: what the ppermutes and backward's reduce_scatter carry (collectives.h); on bf16
// the chunks arrive bf16-rounded, which a bf16 matmul reads as it would the fp32 ones.
Tensor all_gather_linear(const AxisGroup& tensor, const Tensor& x, const Tensor& w, const Tensor& b,
                         DType wire = DType::kF32);

}  // namespace shardlab::parallel
