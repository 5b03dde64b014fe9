#include "framework/nn/config.h"

#include <map>

#include "framework/error.h"

namespace shardlab::nn {
namespace {

const std::map<std::string, ModelConfig>& presets() {
  static const std::map<std::string, ModelConfig> p = [] {
    std::map<std::string, ModelConfig> m;
    ModelConfig gpt;  // the reference benchmark model: V 256, T 256, D 256, L 4, N 4, F 4D
    m["gpt-bench"] = gpt;
    ModelConfig small = gpt;
    small.context = 128;
    small.d_model = 128;
    small.n_heads = 4;
    small.n_kv_heads = 4;
    small.d_ff = 512;
    m["gpt-small"] = small;
    // The default arithmetic job: gpt-small with 64-token rows (6 problems each). Measured on
    // 2 cores, 32 x 64 rows learn the carry (100% held-out accuracy by step 1000-1500) where
    // 16 x 128 rows of the same tokens stay near 10% (README, "What the default job does").
    ModelConfig arith = small;
    arith.context = 64;
    m["gpt-arith"] = arith;
    ModelConfig tiny = gpt;
    tiny.context = 16;
    tiny.d_model = 16;
    tiny.n_layers = 2;
    tiny.n_heads = 2;
    tiny.n_kv_heads = 2;
    tiny.d_ff = 32;
    m["gpt-tiny"] = tiny;
    ModelConfig llama = small;
    llama.arch = Arch::Llama;
    llama.rope_theta = 500000.0f;  // LLaMA 3's RoPE base
    llama.n_kv_heads = 2;
    llama.d_ff = 344;
    m["llama-small"] = llama;
    ModelConfig llama_tiny = tiny;
    llama_tiny.arch = Arch::Llama;
    llama_tiny.rope_theta = 500000.0f;
    llama_tiny.n_heads = 4;
    llama_tiny.n_kv_heads = 2;
    llama_tiny.d_ff = 24;
    m["llama-tiny"] = llama_tiny;
    // Mixture-of-experts variants: Switch-style top-1 for GPT, Mixtral-style top-2 for
    // LLaMA. llama-moe-small's 8 experts of F/2 give each token the MLP FLOPs of
    // llama-small (2 of them active): the dense model of the same active parameters.
    const auto with_experts = [](ModelConfig c, int64_t experts, int64_t k, int64_t d_ff) {
      c.experts = experts;
      c.top_k = k;
      c.d_ff = d_ff;
      return c;
    };
    // Real shapes (issue 27; docs/models.md): GPT-2 small and medium as OpenAI released
    // them (GELU MLP of 4D, learned positions, the head tied to the token table), and
    // LLaMA-3-style models: a trainable ~100M and LLaMA 3.2 1B's shape with shardlab's
    // own untied head (1.50B parameters where the tied original has 1.24B).
    const auto shaped = [](ModelConfig c, int64_t vocab, int64_t context, int64_t d_model, int64_t layers,
                           int64_t heads, int64_t kv_heads, int64_t d_ff) {
      c.vocab = vocab, c.context = context, c.d_model = d_model, c.n_layers = layers;
      c.n_heads = heads, c.n_kv_heads = kv_heads, c.d_ff = d_ff;
      return c;
    };
    m["gpt2-124m"] = shaped(gpt, 50257, 1024, 768, 12, 12, 12, 3072);
    m["gpt2-350m"] = shaped(gpt, 50257, 1024, 1024, 24, 16, 16, 4096);
    m["llama3-1b"] = shaped(llama, 128256, 8192, 2048, 16, 32, 8, 8192);
    m["llama-100m"] = shaped(llama, 32768, 1024, 768, 8, 12, 4, 2048);
    m["gpt-moe-tiny"] = with_experts(tiny, 4, 1, tiny.d_ff);
    m["llama-moe-tiny"] = with_experts(llama_tiny, 4, 2, llama_tiny.d_ff);
    m["llama-moe-small"] = with_experts(llama, 8, 2, llama.d_ff / 2);
    return m;
  }();
  return p;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

void ModelConfig::validate() const {
  require_positive("--vocab", vocab);
  require_positive("--context", context);
  require_positive("--d-model", d_model);
  require_positive("--layers", n_layers);
  require_positive("--heads", n_heads);
  require_positive("--kv-heads", n_kv_heads);
  if (!(norm_eps > 0) || !(rope_theta > 0)) {
    throw UserError("--norm-eps and --rope-theta must be positive, got " + std::to_string(norm_eps) + " and " +
                    std::to_string(rope_theta));
  }
  require_positive("--d-ff", d_ff);
  if (d_model % n_heads != 0) {
    throw UserError("--d-model " + std::to_string(d_model) + " is not divisible by --heads " +
                    std::to_string(n_heads) + "; choose a head count that divides the model width");
  }
  if (n_heads % n_kv_heads != 0) {
    throw UserError("--heads " + std::to_string(n_heads) + " is not a multiple of --kv-heads " +
                    std::to_string(n_kv_heads) + "; each kv head must serve a whole group of query heads");
  }
  if (arch == Arch::Gpt && n_kv_heads != n_heads) {
    throw UserError("GPT models use multi-head attention: --kv-heads " + std::to_string(n_kv_heads) +
                    " must equal --heads " + std::to_string(n_heads) + " (use --arch llama for GQA)");
  }
  if (experts < 0) throw UserError("--experts must be 0 (a dense model) or positive, got " + std::to_string(experts));
  // The MoE settings are checked for a dense model too: a bad value is a mistake either way.
  require_positive("--top-k", top_k);
  require_positive("--moe-every", moe_every);
  if (!(capacity_factor >= 0)) {
    throw UserError("--capacity-factor must be 0 (dropless) or positive, got " + std::to_string(capacity_factor));
  }
  if (!(aux_loss_coef >= 0) || !(z_loss_coef >= 0)) {
    throw UserError("--aux-loss-coef and --z-loss-coef must be 0 or positive, got " + std::to_string(aux_loss_coef) +
                    " and " + std::to_string(z_loss_coef));
  }
  if (experts > 0) {
    if (top_k > experts) {
      throw UserError("--top-k " + std::to_string(top_k) + " must be between 1 and the " + std::to_string(experts) +
                      " experts; each token picks k distinct experts");
    }
    if (moe_every > n_layers) {
      throw UserError("--moe-every " + std::to_string(moe_every) + " exceeds the " + std::to_string(n_layers) +
                      " layers, so no block would have experts; choose at most " + std::to_string(n_layers));
    }
  }
  if (arch == Arch::Llama && head_dim() % 2 != 0) {
    throw UserError("RoPE needs an even head dim, got d_model/heads = " + std::to_string(head_dim()));
  }
}

std::string ModelConfig::describe() const {
  return arch_name(arch) + " V=" + std::to_string(vocab) + " T=" + std::to_string(context) +
         " D=" + std::to_string(d_model) + " L=" + std::to_string(n_layers) + " N=" + std::to_string(n_heads) +
         " K=" + std::to_string(n_kv_heads) + " F=" + std::to_string(d_ff) +
         (arch == Arch::Llama ? " theta=" + std::to_string(static_cast<int64_t>(rope_theta)) : "") +
         (experts > 0 ? " E=" + std::to_string(experts) + " k=" + std::to_string(top_k) +
                            " moe_every=" + std::to_string(moe_every) + " C=" + std::to_string(capacity_factor).substr(0, 4)
                      : "") +
         " remat=" + remat_name(remat);
}

ModelConfig ModelConfig::preset(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) {
    throw UserError("unknown model preset '" + name + "'; known presets: " + join(preset_names()));
  }
  return it->second;
}

std::vector<std::string> ModelConfig::preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, config] : presets()) names.push_back(name);
  return names;
}

Arch parse_arch(const std::string& s) {
  if (s == "gpt") return Arch::Gpt;
  if (s == "llama") return Arch::Llama;
  throw UserError("unknown --arch '" + s + "'; use gpt or llama");
}

Remat parse_remat(const std::string& s) {
  if (s == "none") return Remat::None;
  if (s == "full") return Remat::Full;
  if (s == "save-matmul" || s == "save-matmul-outputs") return Remat::SaveMatmulOutputs;
  if (s == "save-mlp-matmul" || s == "save-mlp-matmul-outputs") return Remat::SaveMlpMatmulOutputs;
  throw UserError("unknown --remat '" + s + "'; use none, full, save-matmul or save-mlp-matmul");
}

FusedHead parse_fused_head(const std::string& s) {
  if (s == "auto") return FusedHead::Auto;
  if (s == "on") return FusedHead::On;
  if (s == "off") return FusedHead::Off;
  throw UserError("unknown --fused-head '" + s + "'; use auto, on or off");
}

std::string fused_head_name(FusedHead f) { return f == FusedHead::Auto ? "auto" : f == FusedHead::On ? "on" : "off"; }

std::string arch_name(Arch a) { return a == Arch::Gpt ? "gpt" : "llama"; }
std::string remat_name(Remat r) {
  switch (r) {
    case Remat::None: return "none";
    case Remat::Full: return "full";
    case Remat::SaveMatmulOutputs: return "save-matmul";
    case Remat::SaveMlpMatmulOutputs: return "save-mlp-matmul";
  }
  return "?";
}

}  // namespace shardlab::nn
