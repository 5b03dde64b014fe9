#include "framework/autograd.h"

#include <unordered_map>
#include <unordered_set>

#include "framework/error.h"
#include "framework/memory.h"
#include "framework/ops/parallel_chunks.h"

namespace shardlab {
namespace {
thread_local bool t_grad_enabled = true;

// out = sum + delta, element by element; `out` may be `sum` (an accumulation in place).
void add_gradients(const Tensor& sum, const Tensor& delta, Tensor& out) {
  SL_ASSERT(sum.numel() == delta.numel() && out.numel() == sum.numel(),
            "gradient " + shape_str(delta.shape()) + " does not match " + shape_str(sum.shape()));
  const float *a = sum.data(), *d = delta.data();
  float* o = out.data();
  const int64_t n = out.numel();
  ops::parallel_chunks(n, 65536, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) o[i] = a[i] + d[i];
  });
}

void add_into(Tensor& acc, const Tensor& delta) { add_gradients(acc, delta, acc); }
}  // namespace

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

Tensor record(Tensor output, std::string name, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!needs_grad(inputs)) return output;
  auto node = std::make_shared<Node>();
  node->name = std::move(name);
  node->edges.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    Edge edge;
    if (input.defined() && input.grad_fn()) {
      edge.node = input.grad_fn();
    } else if (input.defined() && input.requires_grad()) {
      edge.leaf = input;
    }
    node->edges.push_back(std::move(edge));
  }
  node->backward = std::move(backward);
  output.set_grad_fn(std::move(node));
  return output;
}

void accumulate_grad(Tensor& target, const Tensor& delta) {
  Tensor g = target.grad();
  if (!g.defined()) {
    MemoryScope scope(MemoryCategory::Gradients);
    target.set_grad(delta.clone().view(target.shape()));
  } else {
    add_into(g, delta);
  }
  for (auto& hook : target.impl()->grad_hooks) hook(target);
}

namespace {

// Adds `grad` to a running sum. Gradients may alias each other (add returns one tensor for
// both inputs), so a merge writes the sum into a fresh tensor rather than in place (in one
// pass: a copy and an add would read and write the running sum twice).
void merge_into(Tensor& sum, const Tensor& grad) {
  if (!sum.defined()) {
    sum = grad;
    return;
  }
  Tensor fresh = Tensor::empty(sum.shape());
  add_gradients(sum, grad, fresh);
  sum = fresh;
}

// A leaf's contributions within one backward pass: summed first, then accumulated into
// .grad once, when the last edge into it has been processed -- so grad hooks fire exactly
// once per leaf per pass, even for a weight used twice (tied embeddings).
struct LeafSlot {
  Tensor leaf;
  Tensor sum;
  int expected = 0;
  int arrived = 0;
};

}  // namespace

void run_backward(const Tensor& root, const Tensor& seed) {
  if (!root.requires_grad()) return;
  if (!root.grad_fn()) {  // root is itself a leaf
    Tensor r = root;
    accumulate_grad(r, seed);
    return;
  }
  // Reverse topological order of the nodes reachable from root (iterative DFS), counting
  // the edges into each leaf. `order` owns the nodes: clearing a node's edges below would
  // otherwise free its children.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen{root.grad_fn().get()};
  std::unordered_map<TensorImpl*, LeafSlot> leaves;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root.grad_fn(), 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->edges.size()) {
      const Edge& edge = node->edges[next++];
      if (edge.leaf.defined()) {
        LeafSlot& slot = leaves[edge.leaf.impl()];
        slot.leaf = edge.leaf;
        ++slot.expected;
      } else if (edge.node && seen.insert(edge.node.get()).second) {
        stack.push_back({edge.node, 0});
      }
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }

  auto arrive = [&leaves](const Tensor& leaf, const Tensor* grad) {
    LeafSlot& slot = leaves.at(leaf.impl());
    if (grad && grad->defined()) merge_into(slot.sum, *grad);
    if (++slot.arrived == slot.expected && slot.sum.defined()) {
      accumulate_grad(slot.leaf, slot.sum);
      slot.sum = Tensor();
    }
  };

  std::unordered_map<Node*, Tensor> pending;
  pending[root.grad_fn().get()] = seed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = it->get();
    auto found = pending.find(node);
    if (found == pending.end()) {  // no gradient reached this node: its leaf edges arrive empty
      for (const Edge& edge : node->edges) {
        if (edge.leaf.defined()) arrive(edge.leaf, nullptr);
      }
      continue;
    }
    Tensor grad_out = std::move(found->second);
    pending.erase(found);
    std::vector<Tensor> grads = node->backward(grad_out);
    SL_ASSERT(grads.size() == node->edges.size(), "node " + node->name + " returned " + std::to_string(grads.size()) +
                                                      " gradients for " + std::to_string(node->edges.size()) +
                                                      " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& edge = node->edges[i];
      if (edge.leaf.defined()) {
        arrive(edge.leaf, &grads[i]);
      } else if (grads[i].defined() && edge.node) {
        merge_into(pending[edge.node.get()], grads[i]);
      }
    }
    // Free the graph behind us: activations saved by this node die here.
    node->edges.clear();
    node->backward = nullptr;
  }
}

namespace {
thread_local WeightGradients* deferring_into = nullptr;
}  // namespace

void WeightGradients::add(Tensor leaf, std::function<Tensor()> compute) {
  pending_.emplace_back(std::move(leaf), std::move(compute));
}

void WeightGradients::run() {
  for (auto& [leaf, compute] : pending_) accumulate_grad(leaf, compute());
  pending_.clear();
}

DeferWeightGradients::DeferWeightGradients(WeightGradients& into) : previous_(deferring_into) { deferring_into = &into; }
DeferWeightGradients::~DeferWeightGradients() { deferring_into = previous_; }

bool defer_gradient(const Tensor& leaf, std::function<Tensor()> compute) {
  if (!deferring_into || !leaf.defined() || leaf.grad_fn() || !leaf.requires_grad()) return false;
  deferring_into->add(leaf, std::move(compute));
  return true;
}

}  // namespace shardlab
