// The optimizer a run names: --optimizer adamw or sgd with its options, built over any
// parameter source (optim/optimizer.h) -- one process's tensors or a parallel strategy's
// local views.
//
//   auto opt = optim::make_optimizer({.name = "adamw", .adamw = {.weight_decay = 0.1f}}, dp->parameters());
#pragma once

#include <memory>
#include <string>

#include "optim/adamw.h"
#include "optim/sgd.h"

namespace shardlab::optim {

struct OptimizerConfig {
  std::string name = "adamw";  // or "sgd"
  AdamWOptions adamw;
  SGDOptions sgd;
};

// Throws UserError on an unknown name or options the optimizer refuses.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, ParamSource params);

}  // namespace shardlab::optim
