#include "parallel/tensor/collective_matmul.h"

#include <cstring>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/diff_collectives.h"

namespace shardlab::parallel {

Tensor all_gather_linear(const AxisGroup& tensor, const Tensor& x, const Tensor& w, const Tensor& b, DType wire) {
  const int t = tensor.size(), r = tensor.rank();
  const int64_t D = x.dim(-1), O = w.dim(0), rows = x.numel() / D;
  SL_ASSERT(w.ndim() == 2 && w.dim(1) == D, "all_gather_linear: x " + shape_str(x.shape()) + " with w " +
                                                shape_str(w.shape()));
  Shape out_shape = x.shape();
  out_shape[0] *= t;
  out_shape.back() = O;
  Shape gathered_shape = x.shape();
  gathered_shape[0] *= t;
  Tensor y = Tensor::empty(out_shape);
  Tensor gathered = Tensor::empty(gathered_shape);  // X, kept for dW
  {
    NoGradGuard no_grad;
    std::vector<Tensor> chunk{x.detach(), Tensor::empty(x.shape())};
    if (wire != DType::kF32) {  // this rank's rows as the others receive them, as all_gather rounds them
      chunk[0] = x.detach().clone();
      round_to_wire(wire, chunk[0].data(), chunk[0].numel());
    }
    std::memcpy(gathered.data() + r * rows * D, chunk[0].data(), rows * D * sizeof(float));
    for (int s = 0; s < t; ++s) {
      const int held = ((r - s) % t + t) % t;  // whose rows this rank holds at step s
      const Tensor& cur = chunk[s % 2];
      CollectiveHandle pass;
      if (s + 1 < t) pass = ppermute_async(tensor, cur.span(), chunk[(s + 1) % 2].span(), 1, Algorithm::kAuto, wire);
      const Tensor part = ops::linear(ops::reshape(cur, {rows, D}), w.detach(), b.defined() ? b.detach() : Tensor());
      std::memcpy(y.data() + held * rows * O, part.data(), rows * O * sizeof(float));
      if (s + 1 < t) {
        pass.wait();
        const int next = ((r - s - 1) % t + t) % t;
        std::memcpy(gathered.data() + next * rows * D, chunk[(s + 1) % 2].data(), rows * D * sizeof(float));
      }
    }
  }
  std::vector<Tensor> inputs{x, w};
  if (b.defined()) inputs.push_back(b);
  // backward: dX = reduce_scatter(dY · W) over tensor; dW, db from the gathered X, kept as
  // the matmul reads it (bf16 under a bf16 policy; ops::linear keeps its input so too).
  const ComputePrecision precision = compute_precision();
  const MatmulOperand gathered_in = needs_grad(inputs) ? MatmulOperand(gathered, precision) : MatmulOperand();
  return record(y, "all_gather_linear(" + tensor.name() + ")", inputs,
                [&tensor, gathered_in, gathered_shape, precision, w, b, wire,
                 y = y.detach(), x_shape = x.shape()](const Tensor& gy) {
                  const PrecisionScope scope(precision);
                  Tensor xg = Tensor::unallocated(gathered_shape).set_requires_grad(true);
                  Tensor wd = w.detach().set_requires_grad(true);
                  Tensor bd = b.defined() ? b.detach().set_requires_grad(true) : Tensor();
                  run_backward(ops::linear_with_output(xg, gathered_in, wd, bd, y), gy);
                  Tensor gx = scatter_to_group(tensor, xg.grad().detach(), Algorithm::kAuto, wire);
                  std::vector<Tensor> grads{ops::reshape(gx, x_shape).detach(), wd.grad()};
                  if (bd.defined()) grads.push_back(bd.grad());
                  return grads;
                });
}

}  // namespace shardlab::parallel
