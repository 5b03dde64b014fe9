#include "framework/nn/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops.h"
#include "framework/ops/fast_math.h"
#include "framework/ops/lanes.h"

namespace shardlab::nn {

namespace {

struct CachedShape {
  int64_t batch, new_tokens, start, context, heads, kv_heads, head_dim;
};

// q . k over head_dim H: lanes of i = l, l + 16, ... in order, sum_lanes' tree, then the
// ragged tail in order (H need not be a multiple of 16).
float score(const float* q, const float* k, int64_t H) {
  Lanes acc{};
  const int64_t body = H / kLanes * kLanes;
  for (int64_t i = 0; i < body; i += kLanes) acc += load_lanes(q + i) * load_lanes(k + i);
  float dot = sum_lanes(acc);
  for (int64_t i = body; i < H; ++i) dot += q[i] * k[i];
  return dot;
}

// score(q, k_j, H) for the 16 keys k_j = k + j * stride, j < 16, bitwise: their lane sums
// at once (sum_lanes_16) instead of one tree each.
Lanes score_block(const float* q, const float* k, int64_t stride, int64_t H) {
  Lanes acc[kLanes] = {};
  const int64_t body = H / kLanes * kLanes;
  for (int64_t i = 0; i < body; i += kLanes) {
    const Lanes qi = load_lanes(q + i);
#pragma GCC unroll 16
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += qi * load_lanes(k + j * stride + i);
  }
  Lanes dots = sum_lanes_16(acc);
  for (int64_t j = 0; j < kLanes; ++j) {
    for (int64_t i = body; i < H; ++i) dots[j] += q[i] * k[j * stride + i];
  }
  return dots;
}

// Attention of the n new tokens of each row over the row's cache (its real positions up to
// the token's own), written into y[B, n, heads * head_dim]. A task is one row and a group
// of heads: it walks the row's cache positions in order, reading each position's keys and
// values of its heads as one contiguous run. Each head's result is summed in one fixed
// order, whichever task and thread computes it and however many groups there are.
void attend_cached(const float* qkv, const float* kc, const float* vc, const int64_t* pad, float* y,
                   const CachedShape& s) {
  const int64_t H = s.head_dim, N = s.heads, K = s.kv_heads, C = (N + 2 * K) * H, ctx = s.context;
  const int64_t group = N / K;  // query heads per kv head
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  // Enough groups of heads for every thread to have a task (one group for a big batch).
  const int64_t kv_groups = std::clamp<int64_t>(omp_get_max_threads() / s.batch, 1, K);
  const int64_t tasks = s.batch * kv_groups;
#pragma omp parallel if (tasks > 1 && s.batch * N * (s.start + s.new_tokens) * H >= (1 << 15))
  {
    std::vector<float> scores;  // [heads of the group][ctx]
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / kv_groups, g = task % kv_groups;
      const int64_t kv0 = g * K / kv_groups, kv1 = (g + 1) * K / kv_groups;  // this task's kv heads
      const int64_t h0 = kv0 * group, heads = (kv1 - kv0) * group;
      scores.resize(static_cast<size_t>(heads * ctx));
      const int64_t first = pad[b];  // the row's first real position
      for (int64_t t = 0; t < s.new_tokens; ++t) {
        const int64_t visible = s.start + t + 1;
        if (visible <= first) continue;  // a padding position: its output is never read
        const float* q = qkv + (b * s.new_tokens + t) * C + h0 * H;
        // Sixteen positions' scores at a time for each head (their sums at once), then the rest.
        int64_t j = first;
        for (; j + kLanes <= visible; j += kLanes) {
          const float* keys = kc + (b * ctx + j) * K * H;
          for (int64_t h = 0; h < heads; ++h) {
            const Lanes dots = score_block(q + h * H, keys + (kv0 + h / group) * H, K * H, H);
            float* out = scores.data() + h * ctx + j;
            for (int64_t l = 0; l < kLanes; ++l) out[l] = dots[l] * scale;
          }
        }
        for (; j < visible; ++j) {
          const float* keys = kc + (b * ctx + j) * K * H;
          for (int64_t h = 0; h < heads; ++h) scores[h * ctx + j] = score(q + h * H, keys + (kv0 + h / group) * H, H) * scale;
        }
        for (int64_t h = 0; h < heads; ++h) {
          float* p = scores.data() + h * ctx + first;
          ops::softmax_row(p, p, visible - first);
        }
        float* out = y + (b * s.new_tokens + t) * N * H + h0 * H;
        for (int64_t j = first; j < visible; ++j) {
          const float* values = vc + (b * ctx + j) * K * H;
          for (int64_t h = 0; h < heads; ++h) {
            const float pj = scores[h * ctx + j];
            const float* vh = values + (kv0 + h / group) * H;
            float* oh = out + h * H;
#pragma omp simd
            for (int64_t i = 0; i < H; ++i) oh[i] += pj * vh[i];
          }
        }
      }
    }
  }
}

}  // namespace

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
  SL_ASSERT(static_cast<int64_t>(cache.pad.size()) == B, "KV cache built for another batch");
  attend_cached(qkv.data(), kc.data(), vc.data(), cache.pad.data(), y.data(),
                {.batch = B, .new_tokens = n, .start = start, .context = ctx, .heads = N, .kv_heads = K, .head_dim = H});
  return wo(y);
}

}  // namespace shardlab::nn
