#include "framework/ops/embedding.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/bf16.h"
#include "framework/precision.h"

namespace shardlab::ops {
namespace {

// Applies the rotation (sign = +1) or its inverse (sign = -1) to q and k heads; row t is
// at position positions[t], or pos_offset + t where positions is empty.
void rotate(const float* in, float* out, int64_t B, int64_t T, int64_t rotated_heads, int64_t C, int64_t H,
            float theta, int64_t pos_offset, std::span<const int64_t> positions, float sign) {
  std::vector<float> inv_freq(H / 2);
  for (int64_t i = 0; i < H / 2; ++i) inv_freq[i] = std::pow(theta, -2.0f * i / H);
#pragma omp parallel for collapse(2) if (B * T > 16)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const float* src = in + (b * T + t) * C;
      float* dst = out + (b * T + t) * C;
      std::memcpy(dst, src, C * sizeof(float));
      const float pos = static_cast<float>(positions.empty() ? pos_offset + t : positions[t]);
      for (int64_t i = 0; i < H / 2; ++i) {
        const float c = std::cos(pos * inv_freq[i]), s = sign * std::sin(pos * inv_freq[i]);
        for (int64_t h = 0; h < rotated_heads; ++h) {
          const float x0 = src[h * H + 2 * i], x1 = src[h * H + 2 * i + 1];
          dst[h * H + 2 * i] = x0 * c - x1 * s;
          dst[h * H + 2 * i + 1] = x0 * s + x1 * c;
        }
      }
    }
  }
}

Tensor rope_at(const Tensor& qkv, int n_heads, int n_kv_heads, float theta, std::span<const int64_t> positions,
               int64_t pos_offset) {
  SL_ASSERT(qkv.ndim() == 3 && qkv.dim(2) % (n_heads + 2 * n_kv_heads) == 0, "rope: qkv " + shape_str(qkv.shape()));
  const int64_t B = qkv.dim(0), T = qkv.dim(1), C = qkv.dim(2), H = C / (n_heads + 2 * n_kv_heads);
  SL_ASSERT(H % 2 == 0, "rope needs an even head dim, got " + std::to_string(H));
  const int64_t rotated = n_heads + n_kv_heads;
  Tensor y = Tensor::empty(qkv.shape());
  rotate(qkv.data(), y.data(), B, T, rotated, C, H, theta, pos_offset, positions, 1.0f);
  std::vector<int64_t> kept(positions.begin(), positions.end());
  return record(y, "rope", {qkv}, [B, T, C, H, rotated, theta, pos_offset, kept = std::move(kept)](const Tensor& gy) {
    Tensor gx = Tensor::empty(gy.shape());
    rotate(gy.data(), gx.data(), B, T, rotated, C, H, theta, pos_offset, kept, -1.0f);  // rotation^T = inverse
    return std::vector<Tensor>{gx};
  });
}

}  // namespace

Tensor embedding(const Tensor& w, std::span<const int32_t> ids, int64_t B, int64_t T, int64_t first_row,
                 int64_t vocab) {
  SL_ASSERT(w.ndim() == 2 && static_cast<int64_t>(ids.size()) == B * T,
            "embedding: table " + shape_str(w.shape()) + " with " + std::to_string(ids.size()) + " ids");
  const int64_t V = w.dim(0), D = w.dim(1), full = vocab > 0 ? vocab : V;
  SL_ASSERT(first_row >= 0 && first_row + V <= full, "embedding: rows [" + std::to_string(first_row) + ", " +
                                                         std::to_string(first_row + V) + ") of a table of " +
                                                         std::to_string(full));
  // Row of each id in this table, or -1 for ids another shard holds.
  std::vector<int32_t> rows(ids.size());
  for (size_t r = 0; r < ids.size(); ++r) {
    SL_ASSERT(ids[r] >= 0 && ids[r] < full, "token id " + std::to_string(ids[r]) + " outside vocab " + std::to_string(full));
    const int64_t row = ids[r] - first_row;
    rows[r] = row >= 0 && row < V ? static_cast<int32_t>(row) : -1;
  }
  Tensor y = Tensor::empty({B, T, D});
  const bool bf16 = compute_precision().bf16();  // rows enter as their bf16 values (compute_value)
  for (int64_t r = 0; r < B * T; ++r) {
    float* dst = y.data() + r * D;
    if (rows[r] < 0) std::fill(dst, dst + D, 0.0f);
    else if (bf16) round_bf16(w.data() + rows[r] * D, dst, D);
    else std::memcpy(dst, w.data() + rows[r] * D, D * sizeof(float));
  }
  return record(y, "embedding", {w}, [w, rows = std::move(rows), D](const Tensor& gy) {
    Tensor gw = Tensor::zeros(w.shape());
    const float* g = gy.data();
    float* o = gw.data();
    for (size_t r = 0; r < rows.size(); ++r) {  // serial: repeated ids must sum in a fixed order
      if (rows[r] < 0) continue;
#pragma omp simd
      for (int64_t j = 0; j < D; ++j) o[rows[r] * D + j] += g[r * D + j];
    }
    return std::vector<Tensor>{gw};
  });
}

Tensor rope(const Tensor& qkv, int n_heads, int n_kv_heads, float theta, int64_t pos_offset) {
  return rope_at(qkv, n_heads, n_kv_heads, theta, {}, pos_offset);
}

Tensor rope(const Tensor& qkv, int n_heads, int n_kv_heads, float theta, std::span<const int64_t> positions) {
  SL_ASSERT(qkv.ndim() == 3 && static_cast<int64_t>(positions.size()) == qkv.dim(1),
            "rope: " + std::to_string(positions.size()) + " positions for qkv " + shape_str(qkv.shape()));
  return rope_at(qkv, n_heads, n_kv_heads, theta, positions, 0);
}

}  // namespace shardlab::ops
