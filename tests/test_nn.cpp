// Models: parameter names, deterministic initialisation, remat equivalence and savings,
// KV-cache decoding equal to the full forward, and config validation.
#include <doctest/doctest.h>
#include <omp.h>

#include <map>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/memory.h"
#include "framework/nn/transformer.h"
#include "framework/ops.h"
#include "framework/precision.h"
#include "parallel/cost/model/autograd_activations.h"

using namespace shardlab;
using namespace shardlab::nn;
using shardlab::linear_forwards;

namespace {

std::vector<int32_t> tokens(int64_t n, int64_t vocab, int salt) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7 + salt * 13 + i * i) % vocab);
  return ids;
}

// Loss and a copy of every gradient after one backward pass.
std::pair<float, std::vector<std::vector<float>>> loss_and_grads(const ModelConfig& c, int64_t B, int64_t T) {
  Transformer model(c);
  initialize(model, 42);
  auto ids = tokens(B * T, c.vocab, 1), targets = tokens(B * T, c.vocab, 2);
  Tensor loss = model.loss(ids, targets, B, T);
  loss.backward();
  std::vector<std::vector<float>> grads;
  for (auto& [name, p] : model.named_parameters()) grads.emplace_back(p.grad().span().begin(), p.grad().span().end());
  return {loss.item(), grads};
}

}  // namespace

TEST_CASE("parameters have stable hierarchical names") {
  Transformer gpt(ModelConfig::preset("gpt-tiny"));
  auto names = gpt.named_parameters();
  REQUIRE(names.size() == 4 + 2 * 12);
  CHECK(names[0].first == "wte.weight");
  CHECK(names[1].first == "norm_f.weight");
  CHECK(names[4].first == "blocks.0.norm1.weight");
  CHECK(names[6].first == "blocks.0.attn.wqkv.weight");
  CHECK(names.back().first == "blocks.1.mlp.fc2.bias");
  Transformer llama(ModelConfig::preset("llama-tiny"));
  bool has_head = false;
  for (auto& [name, p] : llama.named_parameters()) has_head |= name == "lm_head.weight";
  CHECK(has_head);
}

// The real shapes' parameters, counted on deferred models (nothing allocated): GPT-2
// small and medium have exactly the published counts (biases, LayerNorms, learned
// positions and the tied head as OpenAI's), LLaMA 3.2 1B's shape its 1.24B plus shardlab's
// untied head (V x D more).
TEST_CASE("real-shape presets have the published parameter counts") {
  const auto count = [](const std::string& preset) {
    DeferParameters defer;
    Transformer model(ModelConfig::preset(preset));
    int64_t n = 0;
    for (auto& [name, p] : model.named_parameters()) n += numel_of(p.shape());
    return n;
  };
  CHECK(count("gpt2-124m") == 124439808);
  CHECK(count("gpt2-350m") == 354823168);
  CHECK(count("llama3-1b") == 1235814400 + 128256 * 2048);
  CHECK(count("llama-100m") == doctest::Approx(1e8).epsilon(0.05));
}

TEST_CASE("initialisation depends on seed, name and index only") {
  Transformer a(ModelConfig::preset("gpt-tiny")), b(ModelConfig::preset("gpt-tiny"));
  initialize(a, 7);
  initialize(b, 7);
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    for (int64_t j = 0; j < pa[i].second.numel(); ++j) REQUIRE(pa[i].second.data()[j] == pb[i].second.data()[j]);
  }
  // Two same-shaped matrices with different names differ.
  CHECK(a.blocks[0]->attn.wqkv.weight.data()[0] != a.blocks[1]->attn.wqkv.weight.data()[0]);
  initialize(b, 8);
  CHECK(a.wte.weight.data()[3] != b.wte.weight.data()[3]);
}

TEST_CASE("remat policies give bit-identical gradients and save activation memory") {
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    ModelConfig c = ModelConfig::preset(preset);
    c.context = 32;
    auto [loss0, g0] = loss_and_grads(c, 2, 32);
    for (Remat policy : {Remat::Full, Remat::SaveMatmulOutputs, Remat::SaveMlpMatmulOutputs}) {
      CAPTURE(preset);
      CAPTURE(remat_name(policy));
      c.remat = policy;
      auto [loss1, g1] = loss_and_grads(c, 2, 32);
      CHECK(loss0 == loss1);
      REQUIRE(g0.size() == g1.size());
      for (size_t i = 0; i < g0.size(); ++i) CHECK(g0[i] == g1[i]);
    }
  }
  // Peak activation bytes during forward + backward.
  auto peak_activations = [](Remat r) {
    ModelConfig c = ModelConfig::preset("gpt-small");
    c.n_layers = 4;
    c.remat = r;
    Transformer model(c);
    initialize(model, 1);
    auto ids = tokens(2 * 128, c.vocab, 1);
    MemoryTracker::reset_peaks();
    const int64_t base = MemoryTracker::live(MemoryCategory::Activations);
    model.loss(ids, ids, 2, 128).backward();
    return MemoryTracker::peak(MemoryCategory::Activations) - base;
  };
  const int64_t none = peak_activations(Remat::None), full = peak_activations(Remat::Full),
                save = peak_activations(Remat::SaveMatmulOutputs), mlp = peak_activations(Remat::SaveMlpMatmulOutputs);
  MESSAGE("peak activation bytes: remat none " << none << ", save-matmul " << save << ", save-mlp-matmul " << mlp
                                                << ", full " << full);
  CHECK(full < none * 0.6);
  CHECK(save < none * 0.9);
  CHECK(save > mlp);
  CHECK(mlp > full);
}

TEST_CASE("cost/model/autograd_activations.h counts the activations a forward and backward keep") {
  // The planner's and train_gpt's memory estimates rest on this count: every intermediate
  // a block computes, the attention probabilities, the head's tensors, remat's kept ones.
  // gpt-bench runs at its benchmark size too: the weight gradient a GELU backward holds for
  // a moment (remat's peak) weighs more per token in a small microbatch than in a large one.
  struct Case {
    const char* preset;
    int64_t layers, B, T;  // T 96: not a multiple of the attention's row block
  };
  // Under bf16 a matmul keeps its input's bf16 copy (oneDNN's kernels, 2 bytes) or its
  // rounded fp32 copy (4 bytes): both paths run on any CPU (oneDNN emulates bf16 without it).
  const ComputePrecision fp32{}, native{.compute = DType::kBF16, .matmul = Bf16Matmul::kNative},
      rounded{.compute = DType::kBF16, .matmul = Bf16Matmul::kRounded};
  const auto copy_bytes = [](const ComputePrecision& p) { return !p.bf16() ? 0.0 : p.matmul == Bf16Matmul::kNative ? 2.0 : 4.0; };
  for (const Case& k : {Case{"gpt-small", 3, 2, 96}, Case{"llama-small", 3, 2, 96}, Case{"gpt-bench", 4, 8, 256}})
  for (const ComputePrecision& precision : {fp32, native, rounded})
    for (Remat r : {Remat::None, Remat::Full, Remat::SaveMatmulOutputs, Remat::SaveMlpMatmulOutputs}) {
      if (precision.bf16() && std::string(k.preset) == "gpt-bench") continue;  // the small shapes suffice
      const std::string preset = k.preset;
      const double matmul_copy_bytes = copy_bytes(precision);
      const PrecisionScope scope(precision);
      CAPTURE(preset);
      CAPTURE(matmul_copy_bytes);
      CAPTURE(remat_name(r));
      ModelConfig c = ModelConfig::preset(preset);
      c.n_layers = k.layers;
      c.remat = r;
      Transformer model(c);
      initialize(model, 1);
      const int64_t B = k.B, T = k.T;
      auto ids = tokens(B * T, c.vocab, 1);
      MemoryTracker::reset_peaks();
      const int64_t base = MemoryTracker::live(MemoryCategory::Activations);
      model.loss(ids, ids, B, T).backward();
      const double measured = static_cast<double>(MemoryTracker::peak(MemoryCategory::Activations) - base);
      cost::TransformerShape shape = cost::shape_of(c);
      const double counted = cost::shardlab_activation_bytes(shape, {.tokens = static_cast<double>(B * T),
                                                                      .sequence = T,
                                                                      .remat = r,
                                                                      .layers = static_cast<double>(k.layers),
                                                                      .matmul_copy_bytes = matmul_copy_bytes})
                                 .peak();
      MESSAGE(preset << " copies " << matmul_copy_bytes << " remat " << remat_name(r) << ": measured " << measured
                     << " B, counted " << counted << " B");
      CHECK(counted == doctest::Approx(measured).epsilon(0.05));
    }
  CHECK(cost::attention_probability_elements(256) == 160.0);  // row blocks of 64: (64 + 128 + 192 + 256) / 4
}

TEST_CASE("the fused head trains like linear + cross_entropy, keeps no logits, and auto fuses only large logits") {
  for (const std::string preset : {"gpt-small", "llama-small"}) {
    CAPTURE(preset);
    ModelConfig c = ModelConfig::preset(preset);
    c.n_layers = 2;
    c.vocab = 4096;  // logits of 4096 x 192 rows (3 MiB): one fused chunk, so count the whole
    const int64_t B = 2, T = 96;
    c.fused_head = FusedHead::Off;
    const auto [loss_off, g_off] = loss_and_grads(c, B, T);
    c.fused_head = FusedHead::On;
    const auto [loss_on, g_on] = loss_and_grads(c, B, T);
    CHECK(loss_on == doctest::Approx(loss_off).epsilon(1e-6));
    REQUIRE(g_on.size() == g_off.size());
    double worst = 0;
    for (size_t i = 0; i < g_on.size(); ++i)
      for (size_t j = 0; j < g_on[i].size(); ++j) worst = std::max<double>(worst, std::abs(g_on[i][j] - g_off[i][j]));
    CHECK(worst < 1e-6);
    // Activations: the fused head's count against the tracker's peak, and the saving.
    const auto peak = [&](FusedHead mode) {
      c.fused_head = mode;
      Transformer model(c);
      initialize(model, 1);
      const auto ids = tokens(B * T, c.vocab, 1);
      MemoryTracker::reset_peaks();
      const int64_t base = MemoryTracker::live(MemoryCategory::Activations);
      model.loss(ids, ids, B, T).backward();
      return static_cast<double>(MemoryTracker::peak(MemoryCategory::Activations) - base);
    };
    const double measured = peak(FusedHead::On), measured_unfused = peak(FusedHead::Off);
    cost::ActivationQuery q{.tokens = static_cast<double>(B * T), .sequence = T, .layers = 2};
    q.fused_head_chunk_bytes = static_cast<double>(B * T * c.vocab * 4);
    const double counted = cost::shardlab_activation_bytes(cost::shape_of(c), q).peak();
    MESSAGE(preset << " fused head: measured " << measured << " B, counted " << counted << " B; unfused measured "
                   << measured_unfused << " B");
    CHECK(counted == doctest::Approx(measured).epsilon(0.05));
    CHECK(measured < measured_unfused);  // no softmax and no logits kept (the unfused head frees its logits once cross entropy has its softmax)
  }
  CHECK_FALSE(fuses_head(FusedHead::Auto, 4096, 4096));  // 64 MiB: one chunk, nothing to save
  CHECK(fuses_head(FusedHead::Auto, 4 * 1024, 50257));   // GPT-2 at B 4, T 1024: 0.8 GB
  CHECK(fuses_head(FusedHead::Auto, 4 * 1024, 50257 / 8));  // its eighth under tensor=8: 98 MiB
  CHECK(fuses_head(FusedHead::On, 1, 1));
  CHECK_FALSE(fuses_head(FusedHead::Off, 4 * 1024, 50257));
  CHECK(parse_fused_head("on") == FusedHead::On);
  CHECK_THROWS_AS(parse_fused_head("yes"), UserError);
}

TEST_CASE("save-matmul remat runs no weight matmul twice, save-mlp-matmul only the MLP's up-projections once") {
  ModelConfig c = ModelConfig::preset("gpt-tiny");
  Transformer model(c);
  initialize(model, 1);
  auto ids = tokens(2 * 16, c.vocab, 1);
  // Linear layers a forward + backward runs: the forward once each, under full remat a
  // second time in backward, under save-matmul never again.
  auto linear_outputs = [&](Remat r) {
    model.blocks[0]->remat = r;
    model.blocks[1]->remat = r;
    const int64_t before = linear_forwards();
    model.loss(ids, ids, 2, 16).backward();
    return linear_forwards() - before;
  };
  const int64_t none = linear_outputs(Remat::None), full = linear_outputs(Remat::Full),
                save = linear_outputs(Remat::SaveMatmulOutputs), mlp = linear_outputs(Remat::SaveMlpMatmulOutputs);
  CHECK(full == none + 2 * 4);  // qkv, out, fc, fc2 of both blocks again
  CHECK(save == none);
  CHECK(mlp == none + 2 * 3);   // all but fc again
}

TEST_CASE("KV-cache decoding reproduces the full forward") {
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    ModelConfig c = ModelConfig::preset(preset);
    Transformer model(c);
    initialize(model, 3);
    const int64_t B = 2, T = 9;
    auto ids = tokens(B * T, c.vocab, 5);
    Tensor full;
    {
      NoGradGuard g;
      full = model.logits(ids, B, T);
    }
    KVCache cache(c, B);
    // Prefill 4 positions at once, then one at a time.
    auto slice = [&](int64_t t0, int64_t n) {
      std::vector<int32_t> s;
      for (int64_t b = 0; b < B; ++b) s.insert(s.end(), ids.begin() + b * T + t0, ids.begin() + b * T + t0 + n);
      return s;
    };
    std::vector<Tensor> steps{model.decode(slice(0, 4), B, 4, cache)};
    for (int64_t t = 4; t < T; ++t) steps.push_back(model.decode(slice(t, 1), B, 1, cache));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) {
        const Tensor& s = t < 4 ? steps[0] : steps[t - 3];
        const int64_t row = t < 4 ? b * 4 + t : b;
        for (int64_t v = 0; v < c.vocab; v += 17) {
          CHECK(s.data()[row * c.vocab + v] == doctest::Approx(full.data()[(b * T + t) * c.vocab + v]).epsilon(1e-4));
        }
      }
    }
  }
}

// Past 16 cached positions the attention sums sixteen positions' scores at once
// (framework/nn/attention.cpp); with GQA (two query heads per kv head), heads of 16 and 24
// lanes (24: a ragged tail), and 1 or 2 threads splitting the heads, every decode step
// matches the full forward and is bitwise the same on either thread count.
TEST_CASE("KV-cache decoding past 16 positions matches the full forward on any thread count") {
  for (const int64_t head_dim : {16, 24}) {
    CAPTURE(head_dim);
    ModelConfig c = ModelConfig::preset("llama-tiny");
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_model = 4 * head_dim;
    c.d_ff = 2 * c.d_model;
    c.n_layers = 2;
    c.context = 48;
    Transformer model(c);
    initialize(model, 7);
    const int64_t B = 1, T = 45, prompt = 20;
    const auto ids = tokens(B * T, c.vocab, 13);
    Tensor full;
    {
      NoGradGuard g;
      full = model.logits(ids, B, T);
    }
    std::map<int, std::vector<float>> per_threads;
    const int threads = omp_get_max_threads();
    for (const int n : {1, 2}) {
      omp_set_num_threads(n);
      KVCache cache(c, B);
      model.decode(std::vector<int32_t>(ids.begin(), ids.begin() + prompt), B, prompt, cache);
      for (int64_t t = prompt; t < T; ++t) {
        const Tensor step = model.decode(std::vector<int32_t>{ids[t]}, B, 1, cache);
        for (int64_t v = 0; v < c.vocab; ++v) {
          CHECK(step.data()[v] == doctest::Approx(full.data()[t * c.vocab + v]).epsilon(1e-4));
        }
        per_threads[n].insert(per_threads[n].end(), step.data(), step.data() + step.numel());
      }
    }
    omp_set_num_threads(threads);
    CHECK(per_threads[1] == per_threads[2]);
  }
}

TEST_CASE("a left-padded batch decodes each row as it decodes alone") {
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    ModelConfig c = ModelConfig::preset(preset);
    Transformer model(c);
    initialize(model, 3);
    const std::vector<int64_t> lengths{3, 7, 5};
    const int64_t B = 3, T = 7, steps = 3;
    auto ids = tokens(B * (T + steps), c.vocab, 11);  // row b: its prompt, then `steps` fed tokens
    auto row_tokens = [&](int64_t b, int64_t from, int64_t n) {
      return std::vector<int32_t>(ids.begin() + b * (T + steps) + from, ids.begin() + b * (T + steps) + from + n);
    };
    // The batch: prompts left-padded to T (padding ids are arbitrary: 0), then one token a step.
    KVCache batch(c, B);
    std::vector<int32_t> padded(B * T, 0);
    for (int64_t b = 0; b < B; ++b) {
      batch.pad[b] = T - lengths[b];
      auto p = row_tokens(b, 0, lengths[b]);
      std::copy(p.begin(), p.end(), padded.begin() + b * T + batch.pad[b]);
    }
    std::vector<Tensor> out{model.decode(padded, B, T, batch)};
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int32_t> step;
      for (int64_t b = 0; b < B; ++b) step.push_back(row_tokens(b, lengths[b] + s, 1)[0]);
      out.push_back(model.decode(step, B, 1, batch));
    }
    for (int64_t b = 0; b < B; ++b) {
      KVCache alone(c, 1);
      std::vector<Tensor> ref{model.decode(row_tokens(b, 0, lengths[b]), 1, lengths[b], alone)};
      for (int64_t s = 0; s < steps; ++s) ref.push_back(model.decode(row_tokens(b, lengths[b] + s, 1), 1, 1, alone));
      for (int64_t v = 0; v < c.vocab; v += 7) {  // the prompt's last position, then every step
        CAPTURE(preset);
        CAPTURE(b);
        CHECK(out[0].data()[((b + 1) * T - 1) * c.vocab + v] ==
              doctest::Approx(ref[0].data()[(lengths[b] - 1) * c.vocab + v]).epsilon(1e-4));
        for (int64_t s = 1; s <= steps; ++s) {
          CHECK(out[s].data()[b * c.vocab + v] == doctest::Approx(ref[s].data()[v]).epsilon(1e-4));
        }
      }
    }
  }
}

TEST_CASE("bad model configs are user errors naming the values") {
  ModelConfig c = ModelConfig::preset("gpt-tiny");
  c.n_heads = 3;
  CHECK_THROWS_WITH_AS(Transformer{c}, doctest::Contains("--d-model 16 is not divisible by --heads 3"), UserError);
  c = ModelConfig::preset("gpt-tiny");
  c.n_layers = 0;
  CHECK_THROWS_WITH_AS(Transformer{c}, doctest::Contains("--layers must be positive, got 0"), UserError);
  CHECK_THROWS_WITH_AS(ModelConfig::preset("nope"), doctest::Contains("known presets"), UserError);
  c = ModelConfig::preset("llama-tiny");
  c.n_kv_heads = 3;
  CHECK_THROWS_AS(Transformer{c}, UserError);
}
