// ModelConfig: the sizes and choices that define a Transformer, with named presets.
//
//   ModelConfig c = ModelConfig::preset("llama-tiny");
//   c.n_layers = 2;
//   c.validate();  // throws UserError naming the bad values and the fix
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardlab::nn {

enum class Arch { Gpt, Llama };
// Per block: keep every activation; only the block input; the input and every Linear
// output; or the input and the MLP's up-projection outputs (the book's policy) (remat.h).
enum class Remat { None, Full, SaveMatmulOutputs, SaveMlpMatmulOutputs };
// The training loss's head: ops::linear_cross_entropy (never holding the [B T, V] logits)
// or linear then cross_entropy; Auto fuses where the logits would pass one fused chunk
// (64 MiB: B 4, T 1024 at GPT-2's vocabulary is 0.8 GB). Logits for decoding are whole.
enum class FusedHead { Auto, On, Off };

struct ModelConfig {
  Arch arch = Arch::Gpt;
  int64_t vocab = 256;
  int64_t context = 256;   // T, the longest sequence
  int64_t d_model = 256;   // D
  int64_t n_layers = 4;    // L
  int64_t n_heads = 4;     // N
  int64_t n_kv_heads = 4;  // K (LLaMA GQA; equals N for GPT)
  int64_t d_ff = 1024;     // F
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;  // LLaMA's RoPE base (the llama presets use LLaMA 3's 500000)
  Remat remat = Remat::None;
  FusedHead fused_head = FusedHead::Auto;  // how it runs, not what it computes: not in describe()

  // Mixture of experts (nn/moe.h): 0 experts is a dense model. Otherwise every
  // moe_every-th block (blocks moe_every-1, 2*moe_every-1, ...) has E experts of hidden
  // size d_ff, each token routed to top_k of them; each expert takes at most
  // ceil(capacity_factor * T * top_k / E) tokens of a sequence (0: dropless, up to T).
  int64_t experts = 0;        // E
  int64_t top_k = 1;          // k: 1 as Switch, 2 (renormalised) as Mixtral
  int64_t moe_every = 1;
  float capacity_factor = 1.25f;
  float aux_loss_coef = 0.01f;   // Switch/GShard load-balancing loss E * sum_i f_i P_i
  float z_loss_coef = 0.001f;    // ST-MoE router z-loss mean(logsumexp(logits)^2)

  int64_t head_dim() const { return d_model / n_heads; }
  bool is_moe_layer(int64_t layer) const { return experts > 0 && layer % moe_every == moe_every - 1; }
  int64_t moe_layers() const { return experts > 0 ? n_layers / moe_every : 0; }
  void validate() const;
  std::string describe() const;  // one line for logs

  static ModelConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();
};

Arch parse_arch(const std::string& s);
Remat parse_remat(const std::string& s);  // none | full | save-matmul[-outputs] | save-mlp-matmul[-outputs]
std::string arch_name(Arch a);
std::string remat_name(Remat r);
FusedHead parse_fused_head(const std::string& s);  // auto | on | off
std::string fused_head_name(FusedHead f);

}  // namespace shardlab::nn
