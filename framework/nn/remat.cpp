#include "framework/nn/remat.h"

#include <algorithm>
#include <memory>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/nn/layers.h"
#include "framework/ops.h"

namespace shardlab::nn {
namespace {

// The saved Linear outputs of one checkpoint, in call order.
struct LinearTape {
  std::vector<const Linear*> saved;  // empty: every Linear
  std::vector<Tensor> outputs;
  size_t next = 0;
  bool replaying = false;

  bool saves(const Linear& layer) const {
    return saved.empty() || std::find(saved.begin(), saved.end(), &layer) != saved.end();
  }
};

thread_local LinearTape* active_tape = nullptr;
thread_local int recompute_depth = 0;

// Makes `tape` the one Linear calls see on this thread for the guard's life.
class TapeScope {
 public:
  explicit TapeScope(LinearTape* tape) : outer_(active_tape) { active_tape = tape; }
  ~TapeScope() { active_tape = outer_; }
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  LinearTape* outer_;
};

}  // namespace

bool recomputing() { return recompute_depth > 0; }

Tensor rematerialised_linear(const Linear& layer, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  LinearTape* tape = active_tape;
  if (!tape || !tape->saves(layer)) return ops::linear(x, weight, bias);
  if (!tape->replaying) return tape->outputs.emplace_back(ops::linear(x, weight, bias));
  SL_ASSERT(tape->next < tape->outputs.size(), "remat replay called more Linear layers than the forward did");
  return ops::linear_with_output(x, weight, bias, tape->outputs[tape->next++]);
}

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x, const std::vector<Tensor>& params,
                  Remat policy, std::vector<const Linear*> saved) {
  SL_ASSERT(policy != Remat::None, "checkpoint needs a remat policy, not none");
  SL_ASSERT((policy == Remat::SaveMlpMatmulOutputs) == !saved.empty(), "save-mlp-matmul names the layers it keeps");
  std::shared_ptr<LinearTape> tape;
  if (policy == Remat::SaveMatmulOutputs || policy == Remat::SaveMlpMatmulOutputs) {
    tape = std::make_shared<LinearTape>();
    tape->saved = std::move(saved);
  }
  Tensor y;
  {
    NoGradGuard no_grad;
    TapeScope scope(tape.get());
    y = fn(x);
  }
  // Parameters are inputs only so that the node is recorded when they need gradients;
  // their gradients arrive through the recomputed graph, not through this node.
  std::vector<Tensor> inputs{x};
  inputs.insert(inputs.end(), params.begin(), params.end());
  return record(y, "checkpoint", inputs, [fn, x, tape, n = inputs.size()](const Tensor& gy) {
    Tensor x_again = x.detach().set_requires_grad(x.requires_grad());
    Tensor y_again;
    {
      if (tape) tape->replaying = true;
      TapeScope scope(tape.get());
      ++recompute_depth;
      y_again = fn(x_again);
      --recompute_depth;
    }
    if (tape) {
      SL_ASSERT(tape->next == tape->outputs.size(), "remat replay called fewer Linear layers than the forward did");
      tape->outputs.clear();  // the recomputed graph holds what backward still needs
    }
    run_backward(y_again, gy);
    std::vector<Tensor> grads(n);
    grads[0] = x_again.grad();
    return grads;
  });
}

}  // namespace shardlab::nn
