#include "framework/autograd.h"

#include <unordered_map>
#include <unordered_set>

#include "framework/error.h"
#include "framework/memory.h"

namespace shardlab {
namespace {
thread_local bool t_grad_enabled = true;

void add_into(Tensor& acc, const Tensor& delta) {
  SL_ASSERT(acc.numel() == delta.numel(),
            "gradient " + shape_str(delta.shape()) + " does not match " + shape_str(acc.shape()));
  float* a = acc.data();
  const float* d = delta.data();
  int64_t n = acc.numel();
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) a[i] += d[i];
}
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
  node->inputs = std::move(inputs);
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

void run_backward(const Tensor& root, const Tensor& seed) {
  if (!root.requires_grad()) return;
  // Reverse topological order of the nodes reachable from root (iterative DFS). `order`
  // owns the nodes: clearing a node's inputs below would otherwise free its children.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack;
  if (root.grad_fn()) {
    stack.push_back({root.grad_fn(), 0});
    seen.insert(root.grad_fn().get());
  }
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      const Tensor& input = node->inputs[next++];
      if (input.defined() && input.grad_fn() && seen.insert(input.grad_fn().get()).second) {
        stack.push_back({input.grad_fn(), 0});
      }
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }

  if (!root.grad_fn()) {  // root is itself a leaf
    Tensor r = root;
    accumulate_grad(r, seed);
    return;
  }
  std::unordered_map<Node*, Tensor> pending;
  pending[root.grad_fn().get()] = seed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = it->get();
    auto found = pending.find(node);
    if (found == pending.end()) continue;
    Tensor grad_out = std::move(found->second);
    pending.erase(found);
    std::vector<Tensor> grads = node->backward(grad_out);
    SL_ASSERT(grads.size() == node->inputs.size(), "node " + node->name + " returned " +
                                                       std::to_string(grads.size()) + " gradients for " +
                                                       std::to_string(node->inputs.size()) + " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      Tensor& input = node->inputs[i];
      if (!grads[i].defined() || !input.defined() || !input.requires_grad()) continue;
      if (Node* child = input.grad_fn().get()) {
        auto [slot, inserted] = pending.try_emplace(child, Tensor());
        if (inserted || !slot->second.defined()) {
          slot->second = grads[i];
        } else {
          // Gradients may alias each other (add returns one tensor for both inputs),
          // so a merge writes into a fresh tensor rather than in place.
          Tensor sum = slot->second.clone();
          add_into(sum, grads[i]);
          slot->second = sum;
        }
      } else {
        accumulate_grad(input, grads[i]);
      }
    }
    // Free the graph behind us: activations saved by this node die here.
    node->inputs.clear();
    node->backward = nullptr;
  }
}

}  // namespace shardlab
