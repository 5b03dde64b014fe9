// Rematerialisation (activation checkpointing) of one function of one tensor.
//
// Forward runs `fn` without recording a graph, so its intermediate activations do not
// stay alive; backward runs `fn` again with recording on and back-propagates through
// that fresh graph: parameter gradients accumulate into their leaves as usual (their
// hooks fire), and the gradient w.r.t. x flows on. What the forward keeps is the policy:
//
//   Remat::Full               only x; backward recomputes everything in fn
//   Remat::SaveMatmulOutputs  x and the output of every nn::Linear called in fn; the
//                             recompute takes those back instead of multiplying, so it
//                             redoes only what lies between them (norms, activation
//                             functions, the attention core) -- the weight matmuls, most
//                             of a block's FLOPs, run once, as without remat
//   Remat::SaveMlpMatmulOutputs  x and the outputs of the Linear layers in `saved` only
//                             (a block passes its MLP's up-projections: the book's
//                             policy); the others are recomputed
//
// Either way the gradients are bit-identical to Remat::None: every recomputed value is
// computed exactly as the first time.
//
//   Tensor y = checkpoint([&](const Tensor& h) { return block(h); }, x, block.params(), policy);
#pragma once

#include <functional>
#include <vector>

#include "framework/nn/config.h"
#include "framework/tensor.h"

namespace shardlab::nn {

class Linear;

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x, const std::vector<Tensor>& params,
                  Remat policy = Remat::Full, std::vector<const Linear*> saved = {});

// True while a checkpoint's backward re-runs its function on this thread: layers that
// count what they do (MoE statistics) count the first forward only.
bool recomputing();

// nn::Linear's product x · W^T (+ bias, when defined) with the layer's (possibly hooked)
// weight: ops::linear, or inside a checkpoint that saves this layer's output, that output
// taken back.
Tensor rematerialised_linear(const Linear& layer, const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace shardlab::nn
