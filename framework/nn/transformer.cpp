#include "framework/nn/transformer.h"

#include <algorithm>
#include <cmath>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/nn/remat.h"
#include "framework/ops.h"

namespace shardlab::nn {
namespace {

Norm::Kind norm_kind(const ModelConfig& c) { return c.arch == Arch::Gpt ? Norm::Layer : Norm::Rms; }
float residual_std(const ModelConfig& c) { return 0.02f / std::sqrt(2.0f * static_cast<float>(c.n_layers)); }

const ModelConfig& validated(const ModelConfig& c) {
  c.validate();
  return c;
}

}  // namespace

Block::Block(Module& parent, const std::string& name, const ModelConfig& c, int64_t layer,
             std::shared_ptr<MoeState> moe_state)
    : norm1(*this, "norm1", c.d_model, norm_kind(c), c.norm_eps), attn(*this, "attn", c),
      norm2(*this, "norm2", c.d_model, norm_kind(c), c.norm_eps), remat(c.remat) {
  if (c.is_moe_layer(layer)) {
    moe = std::make_unique<Moe>(*this, "moe", c, residual_std(c), std::move(moe_state));
  } else if (c.arch == Arch::Gpt) {
    mlp = std::make_unique<Mlp>(*this, "mlp", c.d_model, c.d_ff, residual_std(c));
  } else {
    swiglu = std::make_unique<SwiGlu>(*this, "mlp", c.d_model, c.d_ff, residual_std(c));
  }
  parent.add_child_module(*this, name);
}

Tensor Block::feed_forward(const Tensor& x) const {
  if (moe) return (*moe)(x);
  return mlp ? (*mlp)(x) : (*swiglu)(x);
}

Tensor Block::forward(const Tensor& x) const {
  Tensor h = ops::add(x, attn(norm1(x)));
  return ops::add(h, feed_forward(norm2(h)));
}

Tensor Block::operator()(const Tensor& x) const {
  auto run = [this](const Tensor& h) {
    if (remat == Remat::None) return forward(h);
    std::vector<Tensor> params;
    for (auto& [name, p] : const_cast<Block*>(this)->named_parameters()) params.push_back(p);
    std::vector<const Linear*> saved;  // save-mlp-matmul: the MLP's up-projections
    if (remat == Remat::SaveMlpMatmulOutputs) {  // an MoE block keeps its router's logits
      saved = moe ? std::vector<const Linear*>{&moe->router}
              : mlp ? std::vector<const Linear*>{&mlp->fc}
                    : std::vector<const Linear*>{&swiglu->gate, &swiglu->up};
    }
    return checkpoint([this](const Tensor& in) { return forward(in); }, h, params, remat, saved);
  };
  return forward_hooked(x, run);
}

Tensor Block::decode(const Tensor& x, KVCache& cache, int layer) const {
  Tensor h = ops::add(x, attn.decode(norm1(x), cache, layer));
  return ops::add(h, feed_forward(norm2(h)));
}

Transformer::Transformer(const ModelConfig& c)
    : config(validated(c)), wte(*this, "wte", c.vocab, c.d_model),
      norm_f(*this, "norm_f", c.d_model, norm_kind(c), c.norm_eps) {
  if (c.arch == Arch::Gpt) wpe = std::make_unique<Embedding>(*this, "wpe", c.context, c.d_model);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    blocks.push_back(std::make_unique<Block>(*this, "blocks." + std::to_string(l), c, l, moe_state));
  }
  if (c.arch == Arch::Llama) lm_head = std::make_unique<Linear>(*this, "lm_head", c.d_model, c.vocab, false);
}

Tensor Transformer::embed(std::span<const int32_t> ids, int64_t B, int64_t T, int64_t pos_offset,
                          std::span<const int64_t> left_pad) const {
  if (pos_offset + T > config.context) {
    throw UserError("sequence of " + std::to_string(pos_offset + T) + " tokens exceeds the model context " +
                    std::to_string(config.context) + "; raise --context or shorten the sequence");
  }
  Tensor x = wte(ids, B, T);
  if (!wpe) return x;
  if (context_parallel && pos_offset == 0 && left_pad.empty()) {  // this rank's slice of each sequence
    const std::vector<int64_t> at = context_parallel->positions(T);
    std::vector<int32_t> positions(at.begin(), at.end());
    return ops::add(x, ops::reshape((*wpe)(positions, 1, T), {T, config.d_model}));
  }
  if (std::any_of(left_pad.begin(), left_pad.end(), [](int64_t p) { return p > 0; })) {
    // Each row's positions count from its first real token; its padding takes position 0.
    SL_ASSERT(static_cast<int64_t>(left_pad.size()) == B, "one left padding per row");
    std::vector<int32_t> positions(B * T);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) positions[b * T + t] = static_cast<int32_t>(std::max<int64_t>(pos_offset + t - left_pad[b], 0));
    }
    return ops::add(x, (*wpe)(positions, B, T));
  }
  std::vector<int32_t> positions(T);
  for (int64_t t = 0; t < T; ++t) positions[t] = static_cast<int32_t>(pos_offset + t);
  return ops::add(x, ops::reshape((*wpe)(positions, 1, T), {T, config.d_model}));
}

Tensor Transformer::head_input(const Tensor& x) const {
  const Tensor n = norm_f(x);  // its hooks may change the rows (sequence parallelism gathers them)
  return ops::reshape(n, {n.numel() / config.d_model, config.d_model});
}

Tensor Transformer::head_weight() const { return lm_head ? lm_head->used_weight() : wte.weight; }

Tensor Transformer::head(const Tensor& x) const {
  const Tensor h = head_input(x);
  return lm_head ? (*lm_head)(h) : ops::linear(h, wte.weight);
}

bool fuses_head(FusedHead mode, int64_t rows, int64_t vocab_rows) {
  return mode == FusedHead::On || (mode == FusedHead::Auto && ops::linear_cross_entropy_saves_memory(rows, vocab_rows));
}

Tensor Transformer::head_output(std::span<const int32_t> ids, int64_t B, int64_t T) const {
  Tensor x = embed(ids, B, T, 0);
  for (const auto& block : blocks) x = (*block)(x);
  return head(x);
}

Tensor Transformer::logits(std::span<const int32_t> ids, int64_t B, int64_t T) const {
  Tensor h = head_output(ids, B, T);
  return tensor_parallel.logits ? tensor_parallel.logits(h) : h;
}

Tensor Transformer::loss(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T,
                         double denominator) const {
  Tensor x = embed(ids, B, T, 0);
  for (const auto& block : blocks) x = (*block)(x);
  return head_loss(x, targets, denominator);
}

Tensor Transformer::head_loss(const Tensor& x, std::span<const int32_t> targets, double denominator) const {
  const Tensor h = head_input(x);
  const Tensor& local = lm_head ? lm_head->weight : wte.weight;  // this rank's rows under tensor parallelism
  if (fuses_head(config.fused_head, h.dim(0), local.dim(0))) {
    // The fused op takes the weight itself: lm_head's own forward would not run.
    SL_ASSERT(!lm_head || (!lm_head->has_forward_hooks() && !lm_head->tensor_parallel.product &&
                           !lm_head->tensor_parallel.reduce_partial),
              "the fused head bypasses lm_head's forward, and something hooks it");
    const Tensor w = head_weight();
    return tensor_parallel.fused_loss ? tensor_parallel.fused_loss(h, w, targets, denominator)
                                      : ops::linear_cross_entropy(h, w, targets, denominator);
  }
  const Tensor logits = lm_head ? (*lm_head)(h) : ops::linear(h, wte.weight);
  return tensor_parallel.loss ? tensor_parallel.loss(logits, targets, denominator)
                             : ops::cross_entropy(logits, targets, denominator);
}

Tensor Transformer::decode(std::span<const int32_t> ids, int64_t B, int64_t n, KVCache& cache) const {
  NoGradGuard no_grad;
  Tensor x = embed(ids, B, n, cache.length, cache.pad);
  for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->decode(x, cache, static_cast<int>(l));
  cache.length += n;
  return tensor_parallel.logits ? tensor_parallel.logits(head(x)) : head(x);
}

std::unique_ptr<Transformer> deferred_transformer(const ModelConfig& config) {
  DeferParameters defer;
  return std::make_unique<Transformer>(config);
}

}  // namespace shardlab::nn
