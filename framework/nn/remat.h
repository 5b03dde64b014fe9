// Rematerialisation (activation checkpointing) of one function of one tensor.
//
// Forward runs `fn` without recording a graph, so none of its intermediate activations
// stay alive; only the input x is kept. Backward runs `fn` again with recording on and
// back-propagates through that fresh graph: parameter gradients accumulate into their
// leaves as usual (their hooks fire), and the gradient w.r.t. x flows on.
//
//   Tensor y = checkpoint([&](const Tensor& h) { return block(h); }, x, block.params());
#pragma once

#include <functional>
#include <vector>

#include "framework/tensor.h"

namespace shardlab::nn {

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x, const std::vector<Tensor>& params);

}  // namespace shardlab::nn
