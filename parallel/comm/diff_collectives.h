// Differentiable collectives: communication inside autograd, one named forward/backward
// pair per function (Megatron-LM's f and g, picotron's tp_communications).
// Tensors are split and joined along dim 0; "rank" is the rank within the group.
//
//   Tensor h = copy_to_group(tp, x);        // Megatron f: identity, all_reduce in backward
//   Tensor y = ops::linear(h, w_shard);     // column-parallel
//   ...
//   Tensor z = reduce_from_group(tp, part); // Megatron g: all_reduce, identity in backward
//
// Pipeline stages pass activations with send/recv: the sender keeps the token that
// send_to returns and later calls token.backward(), which receives the activation's
// gradient from the next stage and carries on backward through its own graph.
//
//   stage k:    Tensor token = send_to(pipe, y, k + 1);  ...  token.backward();
//   stage k+1:  Tensor x = recv_from(pipe, {B, T, D}, k); ... loss.backward();  // sends dx
#pragma once

#include "framework/tensor.h"
#include "parallel/comm/collectives.h"

namespace shardlab::parallel {

// `wire` (collectives.h): what the collective carries, forward and backward alike -- fp32,
// or bf16 (activations and their gradients under --precision bf16): messages rounded to
// bf16, every sum taken in fp32.
//
// [d0, ...] -> [G*d0, ...], rank i's block i.
Tensor gather_from_group(const AxisGroup& group, const Tensor& x, Algorithm algorithm = Algorithm::kAuto,
                         DType wire = DType::kF32);
// [G*d, ...] -> [d, ...], the sum over ranks of block `rank`.
Tensor scatter_to_group(const AxisGroup& group, const Tensor& x, Algorithm algorithm = Algorithm::kAuto,
                        DType wire = DType::kF32);
// Sum over ranks (Megatron g).
Tensor reduce_from_group(const AxisGroup& group, const Tensor& x, Algorithm algorithm = Algorithm::kAuto,
                         DType wire = DType::kF32);
// Identity (Megatron f).
Tensor copy_to_group(const AxisGroup& group, const Tensor& x, Algorithm algorithm = Algorithm::kAuto,
                     DType wire = DType::kF32);
// [G*d, ...] -> [G*d, ...]: block j goes to rank j, block i of the result came from rank i.
Tensor exchange_in_group(const AxisGroup& group, const Tensor& x, Algorithm algorithm = Algorithm::kAuto,
                         DType wire = DType::kF32);
// Sends x to coordinate `to` of the axis; returns a one-element token whose backward
// receives x's gradient from `to`.
Tensor send_to(const AxisGroup& axis, const Tensor& x, int to);
// Receives a tensor of `shape` from coordinate `from`; its backward sends the gradient back.
Tensor recv_from(const AxisGroup& axis, const Shape& shape, int from);

}  // namespace shardlab::parallel
