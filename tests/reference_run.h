// What every parallel test trains, and the single-process run it compares with: the whole
// global batch on one rank, no MPI, AdamW (weight decay 0.1), the gradient clipped to
// global norm 1.0 -- what parallel::train_step does in any layout.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/data/arithmetic.h"
#include "framework/data/dataset.h"
#include "framework/nn/transformer.h"
#include "framework/ops.h"
#include "optim/make_optimizer.h"
#include "optim/clip.h"

namespace shardlab::testing {

// 10 steps of 8 sequences x 16 tokens of 2-digit arithmetic at learning rate 3e-3.
inline constexpr int kSteps = 10;
inline constexpr int64_t kBatch = 8, kSeq = 16;
inline constexpr float kLr = 3e-3f;
inline constexpr float kWeightDecay = 0.1f;  // AdamW's, on the parameters that decay
// The optimizer of the standard run.
inline const optim::OptimizerConfig kStandardOptimizer{.name = "adamw", .adamw = {.weight_decay = kWeightDecay}, .sgd = {}};

inline std::shared_ptr<const data::Dataset> arithmetic_dataset() {
  static data::ArithmeticTask task({.digits = 2, .seed = 5});
  return task.train();
}

// gpt-tiny or llama-tiny (K = 2 kv heads) with 4 query heads, so that tensor=2 and 4
// divide them, and `layers` blocks.
inline nn::ModelConfig small_model(nn::Arch arch, nn::Remat remat, int64_t layers) {
  nn::ModelConfig c = nn::ModelConfig::preset(arch == nn::Arch::Gpt ? "gpt-tiny" : "llama-tiny");
  c.n_layers = layers;
  c.n_heads = 4;
  if (arch == nn::Arch::Gpt) c.n_kv_heads = 4;
  c.remat = remat;
  return c;
}

using Params = std::map<std::string, std::vector<float>>;

// Every parameter the module holds, by name.
inline Params snapshot(nn::Module& m) {
  Params out;
  for (auto& [name, p] : m.named_parameters()) out[name].assign(p.span().begin(), p.span().end());
  return out;
}

struct Run {
  std::vector<double> losses;
  std::vector<double> grad_norms;  // before clipping: catches a wrong gradient scale, which
                                   // clipping and Adam's normalisation would otherwise hide
  Params params;                   // after the steps
  // MoE models: each step's load-balancing loss (mean over layer forwards) and dropped
  // token choices, over the whole global batch.
  std::vector<double> aux_losses;
  std::vector<int64_t> dropped;
};

struct ReferenceSpec {
  uint64_t seed;
  int64_t batch, seq_len;  // the global batch
  int steps;
  float lr;
  int microbatches;
  optim::OptimizerConfig optimizer = kStandardOptimizer;
};

inline Run single_process_run(const nn::ModelConfig& c, std::shared_ptr<const data::Dataset> dataset,
                              const ReferenceSpec& s) {
  nn::Transformer model(c);
  nn::initialize(model, s.seed);
  const auto optimizer = optim::make_optimizer(s.optimizer, optim::module_parameters(model));
  optim::Optimizer& opt = *optimizer;
  data::BatchLoader loader(std::move(dataset), s.batch, s.seq_len);
  Run r;
  // The auxiliary losses reach backward on their own: they follow the 1/k on the loss.
  model.moe_state->loss_scale = 1.0f / static_cast<float>(s.microbatches);
  for (int step = 0; step < s.steps; ++step) {
    data::Batch batch = loader.next();
    model.moe_state->stats.clear();
    r.losses.push_back(optim::accumulate_gradients(s.microbatches, [&](int i, float scale) {
      data::Batch m = batch.microbatch(i, s.microbatches);
      Tensor l = model.loss(m.inputs, m.targets, m.rows, m.seq_len);
      ops::scale(l, scale).backward();
      return static_cast<double>(l.item());
    }));
    const nn::MoeStats& moe = model.moe_state->stats;
    r.aux_losses.push_back(moe.layer_forwards ? moe.aux_loss / moe.layer_forwards : 0.0);
    r.dropped.push_back(moe.dropped);
    r.grad_norms.push_back(optim::clip_grad_norm(opt.views(), 1.0));
    opt.step(s.lr);
    model.zero_grad();
  }
  r.params = snapshot(model);
  return r;
}

// single_process_run of the standard test run above.
inline Run reference(const nn::ModelConfig& c, int microbatches, uint64_t seed,
                     const optim::OptimizerConfig& optimizer = kStandardOptimizer) {
  return single_process_run(c, arithmetic_dataset(), {.seed = seed, .batch = kBatch, .seq_len = kSeq, .steps = kSteps,
                                                      .lr = kLr, .microbatches = microbatches, .optimizer = optimizer});
}

}  // namespace shardlab::testing
