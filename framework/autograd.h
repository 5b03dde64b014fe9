// Reverse-mode autograd over a graph of Nodes.
//
// Every differentiable op produces one output tensor whose grad_fn is a Node: the op's
// name, one edge per input, and a backward function that maps the output's gradient to
// one gradient per input (an undefined Tensor where an input needs none). An edge holds
// the node that made its input, or the input itself where it is a leaf that wants a
// gradient (a weight) -- never an intermediate's data: what backward needs, the backward
// function captures, so an activation no backward reads is freed as soon as the forward
// is done with it, and an op may keep a smaller form of what it reads (a bf16 matmul keeps
// its bf16 operand, framework/ops/matmul.h). A custom function -- a differentiable
// collective, say -- is just another Node:
//
//   Tensor y = Tensor::empty(x.shape());
//   ... forward: fill y ...
//   record(y, "all_reduce_sum", {x}, [](const Tensor& gy) {   // backward: identity
//     return std::vector<Tensor>{gy};
//   });
//
// backward() walks the graph once in reverse topological order, sums gradients that
// meet at a tensor, and frees the graph as it goes so activations are released early.
// A leaf's contributions are summed first and accumulated into its .grad once, when its
// last edge is done; then its grad hooks run -- exactly once per leaf per backward pass,
// which is what gradient bucketing (DP) and per-block sharding (FSDP) count on.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "framework/tensor.h"

namespace shardlab {

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

// One input of a Node as backward walks it: the node that made it (an intermediate), the
// input itself (a leaf that requires a gradient), or neither (a constant: no gradient).
struct Edge {
  std::shared_ptr<Node> node;
  Tensor leaf;
};

struct Node {
  std::string name;
  std::vector<Edge> edges;  // one per input, in the order of record()'s inputs
  BackwardFn backward;
};

// True unless a NoGradGuard is alive on this thread.
bool grad_enabled();

// Disables graph recording in its scope (evaluation, optimizer updates, KV-cache decode).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when grad is enabled and any input requires a gradient.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Attach a Node to `output` when any input needs a gradient; otherwise does nothing.
// Returns `output` for chaining.
Tensor record(Tensor output, std::string name, std::vector<Tensor> inputs, BackwardFn backward);

// Runs backward from `root` seeded with `seed` (same shape as root).
void run_backward(const Tensor& root, const Tensor& seed);

// Adds `delta` into `target`'s gradient (allocating it on first use) and fires its hooks.
void accumulate_grad(Tensor& target, const Tensor& delta);

// Weight gradients set aside for later: a zero-bubble pipeline splits a backward pass into
// the input-gradient pass (what the previous stage waits for) and a weight-gradient pass
// run later to fill a bubble. While a DeferWeightGradients guard is alive on this thread,
// an op's backward hands the gradient of a leaf weight to defer_gradient() instead of
// returning it (linear does, for its weight and bias); run() computes them and
// accumulates them into .grad, in the order they were deferred.
//
//   WeightGradients weights;
//   { DeferWeightGradients defer(weights); run_backward(y, gy); }  // input gradients only
//   weights.run();                                                  // later: the weights'
class WeightGradients {
 public:
  void add(Tensor leaf, std::function<Tensor()> compute);
  void run();
  bool empty() const { return pending_.empty(); }

 private:
  std::vector<std::pair<Tensor, std::function<Tensor()>>> pending_;
};

class DeferWeightGradients {
 public:
  explicit DeferWeightGradients(WeightGradients& into);
  ~DeferWeightGradients();
  DeferWeightGradients(const DeferWeightGradients&) = delete;
  DeferWeightGradients& operator=(const DeferWeightGradients&) = delete;

 private:
  WeightGradients* previous_;
};

// Defers `leaf`'s gradient, computed by `compute`, when a DeferWeightGradients is alive
// and `leaf` is a leaf that requires a gradient; false (nothing deferred) otherwise.
bool defer_gradient(const Tensor& leaf, std::function<Tensor()> compute);

}  // namespace shardlab
