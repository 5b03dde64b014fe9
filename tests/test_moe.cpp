// Mixture of experts in one process: every routing op gradient-checked, routing and
// capacity against hand-worked cases, and the whole MoE model's gradient -- auxiliary
// losses included -- against finite differences of its objective.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "framework/autograd.h"
#include "framework/nn/transformer.h"
#include "framework/ops.h"
#include "tests/gradcheck.h"

using namespace shardlab;
using shardlab::testing::gradcheck;
using shardlab::testing::random_tensor;
using V = std::vector<Tensor>;

TEST_CASE("routing ops: softmax, top-k gates, dispatch, combine, batched linear") {
  gradcheck([](V& in) { return ops::softmax(in[0]); }, {random_tensor({3, 5}, 1)});
  const std::vector<int32_t> choices{0, 2, 3, 1, 1, 4};  // 3 tokens x k=2 of E=5
  gradcheck([&](V& in) { return ops::topk_gates(ops::softmax(in[0]), choices, 2, true); }, {random_tensor({3, 5}, 2)});
  gradcheck([&](V& in) { return ops::topk_gates(ops::softmax(in[0]), {choices.data(), 3}, 1, false); },
            {random_tensor({3, 5}, 3)});
  const std::vector<int32_t> slots{4, -1, 0, 2, -1, -1};  // token 2 fully dropped
  gradcheck([&](V& in) { return ops::dispatch(in[0], slots, 2, 6); }, {random_tensor({3, 4}, 4)});
  gradcheck([&](V& in) { return ops::combine(in[0], in[1], slots); }, {random_tensor({6, 4}, 5), random_tensor({3, 2}, 6)});
  gradcheck([](V& in) { return ops::batched_linear(in[0], in[1], in[2]); },
            {random_tensor({2, 3, 4}, 7), random_tensor({2, 5, 4}, 8), random_tensor({2, 5}, 9)});
  gradcheck([](V& in) { return ops::batched_linear(in[0], in[1]); }, {random_tensor({3, 2, 4}, 10), random_tensor({3, 3, 4}, 11)});
  gradcheck([](V& in) { return ops::add_group_bias(in[0], in[1]); }, {random_tensor({2, 3, 4}, 13), random_tensor({2, 4}, 14)});

  // Forward values by hand.
  Tensor x = random_tensor({3, 4}, 12);
  Tensor buf = ops::dispatch(x, slots, 2, 6);
  CHECK(buf.data()[4 * 4 + 1] == x.data()[1]);       // token 0's first choice in row 4
  CHECK(buf.data()[0 * 4 + 3] == x.data()[4 + 3]);   // token 1's first choice in row 0
  CHECK(buf.data()[5 * 4] == 0.0f);                  // an empty slot
  Tensor y = ops::combine(buf, Tensor::full({3, 2}, 0.5f), slots);
  CHECK(y.data()[2 * 4] == 0.0f);                    // every choice dropped: zeros
  CHECK(y.data()[4 + 2] == doctest::Approx(x.data()[4 + 2]));  // both choices kept, gates 0.5 + 0.5
}

TEST_CASE("auxiliary losses: values and gradients") {
  // Uniform routing gives a load-balancing loss of exactly 1.
  Tensor uniform = Tensor::full({4, 2}, 0.5f);
  const std::vector<float> even{0.5f, 0.5f, 0.5f, 0.5f};
  CHECK(ops::load_balancing_loss(uniform, even, 2).item() == doctest::Approx(1.0));
  // All choices to expert 0 with its mean probability 0.9: E * 1 * 0.9.
  Tensor skewed = Tensor::empty({2, 2});
  skewed.data()[0] = skewed.data()[2] = 0.9f;
  skewed.data()[1] = skewed.data()[3] = 0.1f;
  const std::vector<float> all_first{1.0f, 0.0f};
  CHECK(ops::load_balancing_loss(skewed, all_first, 1).item() == doctest::Approx(1.8));
  const std::vector<float> f{0.25f, 0.75f, 0.5f, 0.5f, 1.0f, 0.0f};  // 3 sequences x E=2
  gradcheck([&](V& in) { return ops::load_balancing_loss(ops::softmax(in[0]), f, 3); }, {random_tensor({6, 2}, 1)});
  // z-loss of zero logits over E columns: log(E)^2.
  CHECK(ops::z_loss(Tensor::zeros({3, 4})).item() == doctest::Approx(std::log(4.0) * std::log(4.0)));
  gradcheck([](V& in) { return ops::z_loss(in[0]); }, {random_tensor({3, 4}, 2)});
  // attach_loss: x passes through; the loss gets `scale` as its gradient.
  gradcheck([](V& in) { return ops::attach_loss(in[0], ops::z_loss(in[1]), 0.0f); }, {random_tensor({2, 3}, 3), random_tensor({2, 3}, 4)});
  Tensor a = random_tensor({2, 3}, 5).set_requires_grad(true), logits = random_tensor({2, 3}, 6).set_requires_grad(true);
  Tensor out = ops::attach_loss(a, ops::z_loss(logits), 0.5f);
  ops::sum(out).backward();
  Tensor direct = random_tensor({2, 3}, 6).set_requires_grad(true);
  ops::scale(ops::z_loss(direct), 0.5f).backward();
  for (int i = 0; i < 6; ++i) {
    CHECK(a.grad().data()[i] == 1.0f);
    CHECK(logits.grad().data()[i] == doctest::Approx(direct.grad().data()[i]));
  }
}

TEST_CASE("routing: top-k, priority, capacity per sequence, dropless") {
  // 1 sequence, T=4 tokens, E=2 experts; every token prefers expert 0.
  const std::vector<float> probs{0.9f, 0.1f, 0.8f, 0.2f, 0.7f, 0.3f, 0.6f, 0.4f};
  nn::Routing r = nn::route(probs.data(), 1, 4, 2, 1, 2);  // capacity 2
  CHECK(r.choices == std::vector<int32_t>{0, 0, 0, 0});
  CHECK(r.slots == std::vector<int32_t>{0, 1, -1, -1});  // tokens 2 and 3 dropped: first come, first served
  CHECK(r.dropped == 2);
  CHECK(r.load == std::vector<int64_t>{2, 0});
  CHECK(r.fractions == std::vector<float>{1.0f, 0.0f});
  // k=2: first choices take priority over second choices across the whole sequence.
  r = nn::route(probs.data(), 1, 4, 2, 2, 3);
  CHECK(r.slots == std::vector<int32_t>{0, 3, 1, 4, 2, 5, -1, -1});  // token 3's first choice finds expert 0 full
  CHECK(r.dropped == 2);  // ... and its second choice finds expert 1 full after the first choices and tokens 0-2
  // Capacity counts per sequence: two sequences never compete for slots.
  std::vector<float> two(probs);
  two.insert(two.end(), probs.begin(), probs.end());
  r = nn::route(two.data(), 2, 4, 2, 1, 2);
  CHECK(r.slots == std::vector<int32_t>{0, 1, -1, -1, 2, 3, -1, -1});
  // Ties break towards the lower expert index.
  const std::vector<float> tie{0.5f, 0.5f};
  CHECK(nn::route(tie.data(), 1, 1, 2, 1, 1).choices == std::vector<int32_t>{0});

  nn::ModelConfig c = nn::ModelConfig::preset("gpt-moe-tiny");  // E=4, k=1, C=1.25
  CHECK(nn::expert_capacity(c, 16) == 5);  // ceil(1.25 * 16 / 4)
  c.capacity_factor = 0.0f;
  CHECK(nn::expert_capacity(c, 16) == 16);  // dropless
}

namespace {

// The objective the MoE model's gradient belongs to: cross-entropy plus the weighted
// auxiliary losses (their values come from the statistics, their gradients through
// attach_loss).
double objective(const nn::Transformer& m, const std::vector<int32_t>& ids, const std::vector<int32_t>& targets,
                 int64_t B, int64_t T) {
  m.moe_state->stats.clear();
  const double ce = m.loss(ids, targets, B, T).item();
  const nn::MoeStats& s = m.moe_state->stats;
  return ce + m.config.aux_loss_coef * s.aux_loss + m.config.z_loss_coef * s.z_loss;
}

}  // namespace

TEST_CASE("an MoE model's gradient matches finite differences of its objective, with remat too") {
  for (const char* preset : {"gpt-moe-tiny", "llama-moe-tiny"}) {
    INFO("preset " << std::string(preset));
    nn::ModelConfig c = nn::ModelConfig::preset(preset);
    c.vocab = 16;
    c.n_layers = 2;
    c.moe_every = 2;  // block 1 has experts, block 0 a dense MLP
    c.capacity_factor = 2.0f;
    c.aux_loss_coef = 0.1f;
    c.z_loss_coef = 0.05f;
    nn::Transformer m(c);
    nn::initialize(m, 7);
    // A router far from uniform, so that the small steps below never change a token's
    // choices or drops (the objective is only piecewise smooth in the router).
    Tensor& router = m.blocks[1]->moe->router.weight;
    for (int64_t i = 0; i < router.numel(); ++i) router.data()[i] *= 50.0f;
    REQUIRE(!m.blocks[0]->moe);
    REQUIRE(m.blocks[1]->moe);
    const int64_t B = 2, T = 6;
    std::vector<int32_t> ids(B * T), targets(B * T);
    for (int64_t i = 0; i < B * T; ++i) ids[i] = static_cast<int32_t>((i * 5 + 3) % c.vocab), targets[i] = (ids[i] + 1) % 16;
    m.loss(ids, targets, B, T).backward();
    // Check the router, the first expert weights and a dense weight by central differences.
    for (const char* name : {"blocks.1.moe.router.weight", c.arch == nn::Arch::Gpt ? "blocks.1.moe.w_in" : "blocks.1.moe.w_gate",
                             "blocks.0.attn.wqkv.weight"}) {
      INFO("param " << std::string(name));
      Tensor p;
      for (auto& [n, t] : m.named_parameters()) if (n == name) p = t;
      REQUIRE(p.defined());
      const float eps = 2e-3f;
      int bad = 0;
      for (int64_t i = 0; i < std::min<int64_t>(p.numel(), 24); ++i) {
        NoGradGuard no_grad;
        const float saved = p.data()[i];
        p.data()[i] = saved + eps;
        const double up = objective(m, ids, targets, B, T);
        p.data()[i] = saved - eps;
        const double down = objective(m, ids, targets, B, T);
        p.data()[i] = saved;
        const double numeric = (up - down) / (2 * eps);
        if (std::abs(p.grad().data()[i] - numeric) > 1e-3 + 5e-2 * std::abs(numeric)) {
          ++bad;
          MESSAGE("element " << i << ": analytic " << p.grad().data()[i] << " numeric " << numeric);
        }
      }
      CHECK(bad == 0);
    }
    // Every remat policy gives the same gradients and counts each layer once.
    std::vector<std::vector<float>> reference;
    for (auto& [n, t] : m.named_parameters()) reference.emplace_back(t.grad().span().begin(), t.grad().span().end());
    for (nn::Remat policy : {nn::Remat::Full, nn::Remat::SaveMatmulOutputs, nn::Remat::SaveMlpMatmulOutputs}) {
      for (auto& b : m.blocks) b->remat = policy;
      for (auto& [n, t] : m.named_parameters()) t.zero_grad();
      m.moe_state->stats.clear();
      m.loss(ids, targets, B, T).backward();
      CHECK(m.moe_state->stats.layer_forwards == 1);
      size_t i = 0;
      for (auto& [n, t] : m.named_parameters()) {
        const auto g = t.grad().span();
        for (size_t j = 0; j < g.size(); ++j) REQUIRE(g[j] == doctest::Approx(reference[i][j]).epsilon(1e-5));
        ++i;
      }
    }
    for (auto& b : m.blocks) b->remat = nn::Remat::None;
  }
}

TEST_CASE("MoE statistics: drops, load and the capacity that causes them") {
  nn::ModelConfig c = nn::ModelConfig::preset("gpt-moe-tiny");
  c.capacity_factor = 0.5f;  // room for half the tokens
  nn::Transformer m(c);
  nn::initialize(m, 1);
  const int64_t B = 2, T = 16;
  std::vector<int32_t> ids(B * T), targets(B * T, 1);
  std::iota(ids.begin(), ids.end(), 0);
  NoGradGuard no_grad;
  m.loss(ids, targets, B, T);
  const nn::MoeStats& s = m.moe_state->stats;
  CHECK(s.layer_forwards == c.n_layers);
  CHECK(s.choices == c.n_layers * B * T);
  const double kept = std::accumulate(s.load.begin(), s.load.end(), 0.0);
  CHECK(kept + static_cast<double>(s.dropped) == doctest::Approx(static_cast<double>(s.choices)));
  CHECK(kept <= c.n_layers * B * c.experts * nn::expert_capacity(c, T));
  CHECK(s.dropped >= s.choices / 2);  // capacity for at most half
  m.moe_state->stats.clear();
  c.capacity_factor = 0.0f;
  nn::Transformer dropless(c);
  nn::initialize(dropless, 1);
  dropless.loss(ids, targets, B, T);
  CHECK(dropless.moe_state->stats.dropped == 0);
}

TEST_CASE("dropless buffers hold what the fullest expert needs, and compute what padding to T does") {
  nn::ModelConfig c = nn::ModelConfig::preset("llama-moe-tiny");  // E=4, k=2
  const int64_t B = 2, T = 16;
  std::vector<int32_t> ids(B * T), targets(B * T);
  for (int64_t i = 0; i < B * T; ++i) ids[i] = static_cast<int32_t>((7 * i) % c.vocab), targets[i] = ids[(i + 1) % (B * T)];
  // Loss and every gradient of a model whose MoE layers agree on `agree` (0: no hook).
  const auto run = [&](float capacity_factor, int64_t agree, std::vector<int64_t>* needs) {
    nn::ModelConfig k = c;
    k.capacity_factor = capacity_factor;
    nn::Transformer m(k);
    nn::initialize(m, 3);
    for (auto& b : m.blocks) {
      if (!b->moe || (agree == 0 && !needs)) continue;
      b->moe->expert_parallel.agree_capacity = [agree, needs](int64_t needed) {
        if (needs) needs->push_back(needed);
        return agree > 0 ? agree : needed;
      };
    }
    std::vector<std::vector<float>> out{{m.loss(ids, targets, B, T).item()}};
    m.loss(ids, targets, B, T).backward();
    for (auto& [name, t] : m.named_parameters()) out.emplace_back(t.grad().span().begin(), t.grad().span().end());
    CHECK(m.moe_state->stats.dropped == 0);
    return out;
  };
  const auto padded = run(static_cast<float>(c.experts) / c.top_k, 0, nullptr);  // C = ceil(E/k T k / E) = T
  std::vector<int64_t> needs;
  const auto narrowed = run(0.0f, 0, &needs);
  const auto agreed = run(0.0f, T, nullptr);  // a rank of the group needing every slot
  REQUIRE(!needs.empty());
  for (int64_t need : needs) {
    CHECK(need >= T * c.top_k / c.experts);  // some expert takes at least its share
    CHECK(need < T);                          // and none takes every token
  }
  for (const auto* other : {&narrowed, &agreed}) {
    REQUIRE(other->size() == padded.size());
    for (size_t i = 0; i < padded.size(); ++i) {  // each tensor within 1e-5 of its largest entry
      float largest = 0.0f, worst = 0.0f;
      for (size_t j = 0; j < padded[i].size(); ++j) {
        largest = std::max(largest, std::abs(padded[i][j]));
        worst = std::max(worst, std::abs((*other)[i][j] - padded[i][j]));
      }
      CAPTURE(i);
      CHECK(largest > 0.0f);
      CHECK(worst <= 1e-5f * largest);
    }
  }
}
