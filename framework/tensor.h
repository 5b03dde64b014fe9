// Tensor: a float32, row-major, contiguous array with shared storage and autograd state.
//
// A Tensor is a cheap handle (a shared pointer); copies alias the same data. Views
// (reshape, narrow along dim 0) share storage with an offset instead of copying.
// Gradients accumulate into `grad()` of leaf tensors that `requires_grad`.
//
//   Tensor w = Tensor::zeros({4, 3}).set_requires_grad(true);
//   Tensor y = ops::sum(ops::mul(w, w));
//   y.backward();                 // w.grad() now holds 2 * w
//
// Dimension letters used across framework/: B batch, T sequence, D model width,
// F MLP hidden, H head dim, N heads, K kv heads, E experts, V vocab.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace shardlab {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
std::string shape_str(const Shape& shape);

// Aligned float buffer; its bytes are counted by the MemoryTracker while it lives.
// Buffers of 64 KiB and more are recycled by exact size (up to 1 GiB kept) instead of
// being returned to the system, so steady-state training takes no page faults.
class Storage {
 public:
  explicit Storage(int64_t numel);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  float* data() { return data_; }
  int64_t numel() const { return numel_; }

 private:
  float* data_;
  int64_t numel_;
};

struct Node;
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape);
  static Tensor zeros(const Shape& shape);
  static Tensor full(const Shape& shape, float value);
  static Tensor from(const Shape& shape, std::vector<float> values);
  // A shape without data (a deferred parameter, nn::DeferParameters): data() must not be
  // used until share_storage() gives it some.
  static Tensor unallocated(const Shape& shape);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const;
  float* data();
  const float* data() const;
  std::span<float> span() { return {data(), static_cast<size_t>(numel())}; }
  std::span<const float> span() const { return {data(), static_cast<size_t>(numel())}; }
  float item() const;  // the single value of a one-element tensor

  // A tensor with the same storage seen with another shape / a slice of rows.
  // These do not record autograd; ops::reshape and ops::narrow do.
  Tensor view(const Shape& shape) const;
  Tensor rows(int64_t begin, int64_t count) const;  // narrow dim 0
  Tensor clone() const;                              // deep copy, no autograd history
  void copy_(const Tensor& src);                     // same numel, overwrite values
  void fill_(float value);

  // Autograd.
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on);
  Tensor grad() const;                 // undefined until a gradient arrives
  void set_grad(const Tensor& grad);
  void zero_grad();                    // drops the gradient (set to undefined)
  const std::shared_ptr<Node>& grad_fn() const;
  void set_grad_fn(std::shared_ptr<Node> node);
  Tensor detach() const;               // same storage, no history
  void backward() const;               // this must be a scalar; seeds with 1

  // Sharded parameters (FSDP) keep their TensorImpl -- so autograd graphs and modules still
  // refer to them -- while their data comes and goes: release_storage() frees the data
  // (data() must not be used until it is back), share_storage() makes the tensor a view of
  // `count` = numel() floats at `offset` of another storage (a gathered flat buffer).
  void release_storage();
  void share_storage(const std::shared_ptr<Storage>& storage, int64_t offset);
  bool has_storage() const;

  // Called once per backward pass after this leaf's gradient is accumulated (DP and
  // FSDP reducers hook here).
  void add_grad_hook(std::function<void(Tensor&)> hook);

  bool same_as(const Tensor& other) const { return impl_ == other.impl_; }
  TensorImpl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  Shape shape;
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  std::vector<std::function<void(Tensor&)>> grad_hooks;
};

}  // namespace shardlab
