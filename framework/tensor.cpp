#include "framework/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/host_buffer.h"
#include "framework/memory.h"
#include "framework/ops/parallel_chunks.h"

namespace shardlab {
namespace {

// Storage remembers the category it was counted under so the free matches the alloc.
struct StorageHeader {
  MemoryCategory category;
};
constexpr size_t kAlign = kHostBufferAlign;

// Freed buffers of at least kMinCachedBytes are kept by exact size and handed to the next
// Storage of that size. A training step allocates the same shapes every step, and fresh
// pages from the kernel (a fault and a zeroing per 4 KiB, on one thread while the others
// wait) cost several percent of a step -- at GPT-2 124M's size, where a step frees about
// 2 GiB, a quarter of it; smaller buffers are recycled by malloc without touching the
// kernel anyway. The cache holds at most the larger of kMinCapBytes and the most bytes of
// such buffers ever in use at once (PyTorch's caching allocator keeps everything): so the
// process holds at most twice its peak of them; beyond that buffers go back to the system.
class BlockCache {
 public:
  static constexpr size_t kMinCachedBytes = 64 << 10;
  static constexpr size_t kMinCapBytes = size_t{1} << 30;

  char* take(size_t bytes) {
    if (bytes < kMinCachedBytes) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_ += bytes;
    most_in_use_ = std::max(most_in_use_, in_use_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    char* raw = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return raw;
  }

  void give(char* raw, size_t bytes) {
    if (bytes >= kMinCachedBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      in_use_ -= bytes;
      if (cached_ + bytes <= std::max(kMinCapBytes, most_in_use_)) {
        free_[bytes].push_back(raw);
        cached_ += bytes;
        return;
      }
    }
    free_host_buffer(raw, bytes);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<char*>> free_;
  size_t cached_ = 0;
  size_t in_use_ = 0;       // bytes of live Storages of at least kMinCachedBytes
  size_t most_in_use_ = 0;  // their peak
};

// Never destroyed: Storages held by static objects may be freed after main returns.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

size_t allocation_bytes(int64_t numel) {
  return (static_cast<size_t>(numel) * sizeof(float) + kAlign - 1) / kAlign * kAlign + kAlign;
}

}  // namespace

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Storage::Storage(int64_t numel) : numel_(numel) {
  const size_t bytes = allocation_bytes(numel);
  char* raw = block_cache().take(bytes);
  if (raw == nullptr) raw = allocate_host_buffer(bytes);
  auto* header = reinterpret_cast<StorageHeader*>(raw);
  header->category = MemoryTracker::current();
  data_ = reinterpret_cast<float*>(raw + kAlign);
  MemoryTracker::on_alloc(header->category, numel * static_cast<int64_t>(sizeof(float)));
}

Storage::~Storage() {
  char* raw = reinterpret_cast<char*>(data_) - kAlign;
  MemoryTracker::on_free(reinterpret_cast<StorageHeader*>(raw)->category,
                         numel_ * static_cast<int64_t>(sizeof(float)));
  block_cache().give(raw, allocation_bytes(numel_));
}

Tensor Tensor::unallocated(const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) throw UserError("negative dimension in shape " + shape_str(shape));
  }
  Tensor t;
  t.impl_ = std::make_shared<TensorImpl>();
  t.impl_->shape = shape;
  return t;
}

Tensor Tensor::empty(const Shape& shape) {
  Tensor t = unallocated(shape);
  t.impl_->storage = std::make_shared<Storage>(numel_of(shape));
  return t;
}

Tensor Tensor::zeros(const Shape& shape) { return full(shape, 0.0f); }

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  t.fill_(value);
  return t;
}

Tensor Tensor::from(const Shape& shape, std::vector<float> values) {
  SL_ASSERT(static_cast<int64_t>(values.size()) == numel_of(shape),
            std::to_string(values.size()) + " values for shape " + shape_str(shape));
  Tensor t = empty(shape);
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

const Shape& Tensor::shape() const {
  SL_ASSERT(impl_, "use of an undefined tensor");
  return impl_->shape;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  SL_ASSERT(i >= -n && i < n, "dim " + std::to_string(i) + " of shape " + shape_str(shape()));
  return impl_->shape[i < 0 ? i + n : i];
}

int64_t Tensor::numel() const { return numel_of(shape()); }
float* Tensor::data() {
  SL_ASSERT(impl_->storage, "data() of a tensor of shape " + shape_str(impl_->shape) + " that has no storage");
  return impl_->storage->data() + impl_->offset;
}
const float* Tensor::data() const { return const_cast<Tensor*>(this)->data(); }

float Tensor::item() const {
  SL_ASSERT(numel() == 1, "item() of a tensor of shape " + shape_str(shape()));
  return data()[0];
}

Tensor Tensor::view(const Shape& shape) const {
  SL_ASSERT(numel_of(shape) == numel(), "view " + shape_str(this->shape()) + " as " + shape_str(shape));
  Tensor t;
  t.impl_ = std::make_shared<TensorImpl>();
  t.impl_->shape = shape;
  t.impl_->storage = impl_->storage;
  t.impl_->offset = impl_->offset;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  SL_ASSERT(ndim() >= 1 && begin >= 0 && count >= 0 && begin + count <= dim(0),
            "rows(" + std::to_string(begin) + ", " + std::to_string(count) + ") of " + shape_str(shape()));
  Shape s = shape();
  int64_t row = numel() / std::max<int64_t>(s[0], 1);
  s[0] = count;
  Tensor t = view(shape());
  t.impl_->shape = s;
  t.impl_->offset += begin * row;
  return t;
}

namespace {
// Large copies and fills are split over the OpenMP threads: one thread alone would keep
// the others waiting (a gradient clone at GPT-2's vocabulary is 154 MB).
constexpr int64_t kParallelBytes = int64_t{1} << 20;
constexpr int64_t kSliceFloats = int64_t{1} << 16;
}  // namespace

Tensor Tensor::clone() const {
  Tensor t = empty(shape());
  const float* from = data();
  float* to = t.data();
  const int64_t n = numel();
#pragma omp parallel for if (n * static_cast<int64_t>(sizeof(float)) > kParallelBytes)
  for (int64_t i = 0; i < n; i += kSliceFloats) {
    std::memcpy(to + i, from + i, std::min(kSliceFloats, n - i) * sizeof(float));
  }
  return t;
}

void Tensor::copy_(const Tensor& src) {
  SL_ASSERT(src.numel() == numel(), "copy_ " + shape_str(src.shape()) + " into " + shape_str(shape()));
  std::memmove(data(), src.data(), numel() * sizeof(float));
}

void Tensor::fill_(float value) {
  float* p = data();
  const int64_t n = numel();
  ops::parallel_chunks(n, kParallelBytes / static_cast<int64_t>(sizeof(float)), [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) p[i] = value;
  });
}

bool Tensor::requires_grad() const { return impl_ && (impl_->requires_grad || impl_->grad_fn); }

Tensor& Tensor::set_requires_grad(bool on) {
  impl_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return impl_->grad; }
void Tensor::set_grad(const Tensor& grad) { impl_->grad = grad; }
void Tensor::zero_grad() { impl_->grad = Tensor(); }
const std::shared_ptr<Node>& Tensor::grad_fn() const { return impl_->grad_fn; }
void Tensor::set_grad_fn(std::shared_ptr<Node> node) { impl_->grad_fn = std::move(node); }

Tensor Tensor::detach() const { return view(shape()); }

void Tensor::backward() const {
  SL_ASSERT(numel() == 1, "backward() needs a scalar, got " + shape_str(shape()));
  run_backward(*this, Tensor::full(shape(), 1.0f));
}

bool Tensor::has_storage() const { return impl_->storage != nullptr; }

void Tensor::release_storage() {
  impl_->storage.reset();
  impl_->offset = 0;
}

void Tensor::share_storage(const std::shared_ptr<Storage>& storage, int64_t offset) {
  SL_ASSERT(offset >= 0 && offset + numel() <= storage->numel(), "share_storage: view out of range");
  impl_->storage = storage;
  impl_->offset = offset;
}

void Tensor::add_grad_hook(std::function<void(Tensor&)> hook) { impl_->grad_hooks.push_back(std::move(hook)); }

}  // namespace shardlab
