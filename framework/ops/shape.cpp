#include "framework/ops/shape.h"

#include <cstring>

#include "framework/autograd.h"
#include "framework/error.h"

namespace shardlab::ops {
namespace {

int normalise_dim(const Tensor& x, int dim) {
  const int n = x.ndim();
  SL_ASSERT(dim >= -n && dim < n, "dim " + std::to_string(dim) + " of " + shape_str(x.shape()));
  return dim < 0 ? dim + n : dim;
}

// A tensor seen as [outer, x.dim(dim), inner] around `dim`.
struct Around {
  int64_t outer = 1, size = 1, inner = 1;
  Around(const Tensor& x, int dim) {
    for (int i = 0; i < dim; ++i) outer *= x.dim(i);
    size = x.dim(dim);
    for (int i = dim + 1; i < x.ndim(); ++i) inner *= x.dim(i);
  }
};

// Copies rows [start, start + len) of dim from src ([outer, src_size, inner]) into dst
// ([outer, dst_size, inner]) at dst_start.
void copy_slab(const float* src, int64_t src_size, int64_t start, float* dst, int64_t dst_size,
               int64_t dst_start, int64_t len, int64_t outer, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + (o * dst_size + dst_start) * inner, src + (o * src_size + start) * inner,
                len * inner * sizeof(float));
  }
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  Tensor y = x.view(shape);
  const Shape original = x.shape();
  return record(y, "reshape", {x}, [original](const Tensor& gy) { return std::vector<Tensor>{gy.view(original)}; });
}

Tensor transpose(const Tensor& x, int dim0, int dim1) {
  dim0 = normalise_dim(x, dim0);
  dim1 = normalise_dim(x, dim1);
  Shape out_shape = x.shape();
  std::swap(out_shape[dim0], out_shape[dim1]);
  Tensor y = Tensor::empty(out_shape);
  // Walk the output in order; map each index back to the input by swapping two coords.
  // The dims after the later of the two stay in place: they move as contiguous runs.
  const int n = std::max(dim0, dim1) + 1;
  int64_t run = 1;
  for (int i = n; i < x.ndim(); ++i) run *= x.dim(i);
  std::vector<int64_t> in_stride(n, run);
  for (int i = n - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * x.dim(i + 1);
  std::swap(in_stride[dim0], in_stride[dim1]);
  std::vector<int64_t> idx(n, 0);
  const float* src = x.data();
  float* dst = y.data();
  for (int64_t k = 0, total = y.numel(); k < total; k += run) {
    int64_t off = 0;
    for (int i = 0; i < n; ++i) off += idx[i] * in_stride[i];
    if (run == 1) dst[k] = src[off];
    else std::memcpy(dst + k, src + off, run * sizeof(float));
    for (int i = n - 1; i >= 0 && ++idx[i] == out_shape[i]; --i) idx[i] = 0;
  }
  return record(y, "transpose", {x}, [dim0, dim1](const Tensor& gy) {
    NoGradGuard no_grad;
    return std::vector<Tensor>{transpose(gy, dim0, dim1)};
  });
}

Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length) {
  dim = normalise_dim(x, dim);
  SL_ASSERT(start >= 0 && length >= 0 && start + length <= x.dim(dim),
            "narrow(" + std::to_string(dim) + ", " + std::to_string(start) + ", " + std::to_string(length) +
                ") of " + shape_str(x.shape()));
  const Around a(x, dim);
  Tensor y;
  if (dim == 0) {
    y = x.rows(start, length);
  } else {
    Shape out_shape = x.shape();
    out_shape[dim] = length;
    y = Tensor::empty(out_shape);
    copy_slab(x.data(), a.size, start, y.data(), length, 0, length, a.outer, a.inner);
  }
  const Shape in_shape = x.shape();
  return record(y, "narrow", {x}, [in_shape, a, start, length](const Tensor& gy) {
    Tensor gx = Tensor::zeros(in_shape);
    copy_slab(gy.data(), length, 0, gx.data(), a.size, start, length, a.outer, a.inner);
    return std::vector<Tensor>{gx};
  });
}

std::vector<Tensor> split(const Tensor& x, int dim, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(narrow(x, dim, start, s));
    start += s;
  }
  SL_ASSERT(start == x.dim(dim), "split sizes sum to " + std::to_string(start) + ", dim has " + std::to_string(x.dim(dim)));
  return parts;
}

Tensor concat(const std::vector<Tensor>& xs, int dim) {
  SL_ASSERT(!xs.empty(), "concat of nothing");
  dim = normalise_dim(xs[0], dim);
  Shape out_shape = xs[0].shape();
  out_shape[dim] = 0;
  for (const Tensor& t : xs) {
    bool same = t.ndim() == xs[0].ndim();
    for (int i = 0; same && i < t.ndim(); ++i) same = i == dim || t.dim(i) == xs[0].dim(i);
    SL_ASSERT(same, "concat: " + shape_str(t.shape()) + " with " + shape_str(xs[0].shape()) + " on dim " + std::to_string(dim));
    out_shape[dim] += t.dim(dim);
  }
  Tensor y = Tensor::empty(out_shape);
  const Around a(y, dim);
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const Tensor& t : xs) {
    copy_slab(t.data(), t.dim(dim), 0, y.data(), a.size, start, t.dim(dim), a.outer, a.inner);
    starts.push_back(start);
    start += t.dim(dim);
  }
  std::vector<int64_t> lengths;
  for (const Tensor& t : xs) lengths.push_back(t.dim(dim));
  return record(y, "concat", xs, [dim, starts, lengths](const Tensor& gy) {
    std::vector<Tensor> grads;
    NoGradGuard no_grad;
    for (size_t i = 0; i < starts.size(); ++i) grads.push_back(narrow(gy, dim, starts[i], lengths[i]).clone());
    return grads;
  });
}

}  // namespace shardlab::ops
