#include "parallel/comm/diff_collectives.h"

#include "framework/autograd.h"
#include "framework/error.h"
#include "parallel/comm/comm_context.h"

namespace shardlab::parallel {
namespace {

Shape with_dim0(const Shape& shape, int64_t d0) {
  Shape s = shape;
  s[0] = d0;
  return s;
}

void check_dim0(const AxisGroup& g, const Tensor& x, const char* op) {
  if (x.ndim() == 0) throw UserError(std::string(op) + " over axis '" + g.name() + "' needs a tensor with dim 0");
  if (x.dim(0) % g.size() != 0) {
    throw UserError(std::string(op) + " over axis '" + g.name() + "': dim 0 of shape " + shape_str(x.shape()) +
                    " is not divisible by the group size " + std::to_string(g.size()) + "; pad it");
  }
}

Tensor gather(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  Tensor y = Tensor::empty(with_dim0(x.shape(), x.dim(0) * g.size()));
  all_gather(g, x.span(), y.span(), a, wire);
  return y;
}

Tensor scatter(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  check_dim0(g, x, "reduce_scatter");
  Tensor y = Tensor::empty(with_dim0(x.shape(), x.dim(0) / g.size()));
  reduce_scatter(g, x.span(), y.span(), a, wire);
  return y;
}

Tensor reduce(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  Tensor y = x.clone();
  all_reduce(g, y.span(), ReduceOp::kSum, a, wire);
  return y;
}

Tensor exchange(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  check_dim0(g, x, "all_to_all");
  Tensor y = Tensor::empty(x.shape());
  all_to_all(g, x.span(), y.span(), a, wire);
  return y;
}

}  // namespace

Tensor gather_from_group(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  // forward: all_gather; backward: reduce_scatter over the group
  return record(gather(g, x, a, wire), "all_gather(" + g.name() + ")", {x},
                [&g, a, wire](const Tensor& gy) { return std::vector<Tensor>{scatter(g, gy, a, wire)}; });
}

Tensor scatter_to_group(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  // forward: reduce_scatter; backward: all_gather over the group
  return record(scatter(g, x, a, wire), "reduce_scatter(" + g.name() + ")", {x},
                [&g, a, wire](const Tensor& gy) { return std::vector<Tensor>{gather(g, gy, a, wire)}; });
}

Tensor reduce_from_group(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  // forward: all_reduce (sum); backward: identity over the group (Megatron g)
  return record(reduce(g, x, a, wire), "all_reduce(" + g.name() + ")", {x},
                [](const Tensor& gy) { return std::vector<Tensor>{gy}; });
}

Tensor copy_to_group(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  // forward: identity; backward: all_reduce (sum) over the group (Megatron f)
  return record(x.detach(), "copy_to(" + g.name() + ")", {x},
                [&g, a, wire](const Tensor& gy) { return std::vector<Tensor>{reduce(g, gy, a, wire)}; });
}

Tensor exchange_in_group(const AxisGroup& g, const Tensor& x, Algorithm a, DType wire) {
  // forward: all_to_all; backward: all_to_all over the group (it is its own inverse)
  return record(exchange(g, x, a, wire), "all_to_all(" + g.name() + ")", {x},
                [&g, a, wire](const Tensor& gy) { return std::vector<Tensor>{exchange(g, gy, a, wire)}; });
}

Tensor send_to(const AxisGroup& axis, const Tensor& x, int to) {
  // forward: send to `to`; backward: recv the gradient from `to` over the axis
  send(axis, x.span(), to);
  Shape shape = x.shape();
  return record(Tensor::zeros({1}), "send(" + axis.name() + ")", {x}, [&axis, to, shape](const Tensor&) {
    Tensor gx = Tensor::empty(shape);
    recv(axis, gx.span(), to);
    return std::vector<Tensor>{gx};
  });
}

Tensor recv_from(const AxisGroup& axis, const Shape& shape, int from) {
  // forward: recv from `from`; backward: send the gradient to `from` over the axis
  Tensor y = Tensor::empty(shape);
  recv(axis, y.span(), from);
  // record() attaches a node only below an input that wants a gradient; this anchor is
  // that input (it receives none): the graph ends here and continues on stage `from`.
  Tensor anchor = Tensor::zeros({1}).set_requires_grad(true);
  return record(y, "recv(" + axis.name() + ")", {anchor}, [&axis, from](const Tensor& gy) {
    send(axis, gy.span(), from);
    return std::vector<Tensor>{Tensor()};
  });
}

}  // namespace shardlab::parallel
