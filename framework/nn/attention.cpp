#include "framework/nn/attention.h"

#include <cmath>
#include <cstring>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops.h"

namespace shardlab::nn {

KVCache::KVCache(const ModelConfig& c, int64_t batch, int64_t kv_heads) : pad(static_cast<size_t>(batch), 0) {
  const int64_t K = kv_heads > 0 ? kv_heads : c.n_kv_heads;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    k.push_back(Tensor::zeros({batch, c.context, K * c.head_dim()}));
    v.push_back(Tensor::zeros({batch, c.context, K * c.head_dim()}));
  }
}

Attention::Attention(Module& parent, const std::string& name, const ModelConfig& c)
    : wqkv(*this, "wqkv", c.d_model, (c.n_heads + 2 * c.n_kv_heads) * c.head_dim(), c.arch == Arch::Gpt),
      wo(*this, "wo", c.n_heads * c.head_dim(), c.d_model, c.arch == Arch::Gpt,
         0.02f / std::sqrt(2.0f * static_cast<float>(c.n_layers))),
      n_heads(c.n_heads), n_kv_heads(c.n_kv_heads), head_dim(c.head_dim()), rope(c.arch == Arch::Llama),
      rope_theta(c.rope_theta) {
  parent.add_child_module(*this, name);
}

Tensor Attention::operator()(const Tensor& x) const {
  return forward_hooked(x, [this](const Tensor& in) {
    Tensor qkv = wqkv(in);
    if (context_parallel) {  // this rank's rows are a slice of each sequence
      if (rope) qkv = ops::rope(qkv, n_heads, n_kv_heads, rope_theta, context_parallel->positions(qkv.dim(1)));
      return wo(context_parallel->attention(qkv, n_heads, n_kv_heads));
    }
    if (rope) qkv = ops::rope(qkv, n_heads, n_kv_heads, rope_theta);
    return wo(ops::causal_attention(qkv, n_heads, n_kv_heads));
  });
}

Tensor Attention::decode(const Tensor& x, KVCache& cache, int layer) const {
  NoGradGuard no_grad;
  const int64_t B = x.dim(0), n = x.dim(1), H = head_dim, N = n_heads, K = n_kv_heads;
  const int64_t start = cache.length, C = (N + 2 * K) * H, ctx = cache.k[layer].dim(1);
  SL_ASSERT(cache.k[layer].dim(2) == K * H, "KV cache built for another number of kv heads than this attention keeps");
  if (start + n > ctx) {
    throw UserError("generation would reach position " + std::to_string(start + n) + " past the model context " +
                    std::to_string(ctx) + "; ask for fewer tokens");
  }
  Tensor qkv = wqkv(x);
  if (rope) qkv = ops::rope(qkv, N, K, rope_theta, start);
  Tensor& kc = cache.k[layer];
  Tensor& vc = cache.v[layer];
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < n; ++t) {
      const float* row = qkv.data() + (b * n + t) * C;
      std::memcpy(kc.data() + (b * ctx + start + t) * K * H, row + N * H, K * H * sizeof(float));
      std::memcpy(vc.data() + (b * ctx + start + t) * K * H, row + (N + K) * H, K * H * sizeof(float));
    }
  }
  Tensor y = Tensor::zeros({B, n, N * H});
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  std::vector<float> p(ctx);
  SL_ASSERT(static_cast<int64_t>(cache.pad.size()) == B, "KV cache built for another batch");
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = cache.pad[b];  // the row's first real position
    for (int64_t t = 0; t < n; ++t) {
      const int64_t visible = start + t + 1;
      if (visible <= first) continue;  // a padding position: its output is never read
      for (int64_t h = 0; h < N; ++h) {
        const int64_t kv = h / (N / K);
        const float* q = qkv.data() + (b * n + t) * C + h * H;
        float m = -INFINITY, z = 0.0f;
        for (int64_t j = first; j < visible; ++j) {
          const float* kr = kc.data() + (b * ctx + j) * K * H + kv * H;
          float s = 0.0f;
          for (int64_t i = 0; i < H; ++i) s += q[i] * kr[i];
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        for (int64_t j = first; j < visible; ++j) z += (p[j] = std::exp(p[j] - m));
        float* out = y.data() + (b * n + t) * N * H + h * H;
        for (int64_t j = first; j < visible; ++j) {
          const float* vr = vc.data() + (b * ctx + j) * K * H + kv * H;
          for (int64_t i = 0; i < H; ++i) out[i] += p[j] / z * vr[i];
        }
      }
    }
  }
  return wo(y);
}

}  // namespace shardlab::nn
