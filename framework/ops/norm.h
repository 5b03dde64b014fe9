// Normalisation over the last dim (D), per row.
#pragma once

#include "framework/tensor.h"

namespace shardlab::ops {

// y = (x - mean) / sqrt(var + eps) * w + b; x[..., D], w[D], b[D].
Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps = 1e-5f);

// y = x / sqrt(mean(x^2) + eps) * w; x[..., D], w[D].
Tensor rms_norm(const Tensor& x, const Tensor& w, float eps = 1e-5f);

}  // namespace shardlab::ops
