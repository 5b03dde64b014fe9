#include "framework/nn/remat.h"

#include "framework/autograd.h"

namespace shardlab::nn {

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x, const std::vector<Tensor>& params) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = fn(x);
  }
  // Parameters are inputs only so that the node is recorded when they need gradients;
  // their gradients arrive through the recomputed graph, not through this node.
  std::vector<Tensor> inputs{x};
  inputs.insert(inputs.end(), params.begin(), params.end());
  return record(y, "checkpoint", inputs, [fn, x, n = inputs.size()](const Tensor& gy) {
    Tensor x_again = x.detach().set_requires_grad(x.requires_grad());
    Tensor y_again = fn(x_again);
    run_backward(y_again, gy);
    std::vector<Tensor> grads(n);
    grads[0] = x_again.grad();
    return grads;
  });
}

}  // namespace shardlab::nn
