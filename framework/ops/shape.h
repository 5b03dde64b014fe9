// Shape ops with autograd: reshape (a view), transpose, narrow (split) and concat.
#pragma once

#include <vector>

#include "framework/tensor.h"

namespace shardlab::ops {

Tensor reshape(const Tensor& x, const Shape& shape);           // shares storage
Tensor transpose(const Tensor& x, int dim0, int dim1);          // copies
Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length);  // copies (view for dim 0)
std::vector<Tensor> split(const Tensor& x, int dim, const std::vector<int64_t>& sizes);
Tensor concat(const std::vector<Tensor>& xs, int dim);

}  // namespace shardlab::ops
