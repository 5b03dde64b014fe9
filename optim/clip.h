// Gradient clipping by global norm, and gradient accumulation over microbatches.
//
// clip_grad_norm computes the L2 norm of all gradients together, as
// torch.nn.utils.clip_grad_norm_: norm = sqrt(reduce(local sum of squares)); when
// norm > max_norm every gradient is scaled by max_norm / (norm + 1e-6). The gradients are
// the parameter views' (optimizer.h); a view another process also holds and counts comes
// with counted = false: it is scaled but adds nothing to this process's sum, so that
// `reduce` -- a parallel strategy's sum over the ranks that shard the gradients -- counts
// every gradient element once. By default `reduce` is the identity.
//
//   double norm = optim::clip_grad_norm(opt.views(), 1.0);                  // one process
//   double norm = optim::clip_grad_norm(opt.views(), 1.0, [&](double s) {   // sharded
//     return mesh_axis.all_reduce_sum(s); });
//
// Accumulation: run k microbatches of equal size per optimizer step and call backward on
// each microbatch's mean loss scaled by 1/k; gradients add up in .grad(), so they equal
// the gradient of the mean loss over the whole batch -- one large batch.
//
//   double loss = optim::accumulate_gradients(k, [&](int i, float loss_scale) {
//     Tensor l = model.loss(batch.microbatch(i, k));
//     ops::scale(l, loss_scale).backward();
//     return l.item();
//   });   // the mean of the k microbatch losses
#pragma once

#include <functional>

#include "optim/optimizer.h"

namespace shardlab::optim {

using SquaredNormReduce = std::function<double(double local_sum_of_squares)>;

// Returns the global gradient norm before clipping. Views without a gradient count as
// zero. max_norm <= 0 only measures the norm.
double clip_grad_norm(const ParamViews& params, double max_norm, const SquaredNormReduce& reduce = {});

// Calls microbatch(i, 1 / k) for i = 0 .. k-1 and returns the mean of the losses it
// returns. Throws UserError when k < 1.
double accumulate_gradients(int k, const std::function<double(int index, float loss_scale)>& microbatch);

}  // namespace shardlab::optim
