#include "optim/make_optimizer.h"

#include "framework/error.h"

namespace shardlab::optim {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, ParamSource params) {
  if (config.name == "adamw") return std::make_unique<AdamW>(std::move(params), config.adamw);
  if (config.name == "sgd") return std::make_unique<SGD>(std::move(params), config.sgd);
  throw UserError("unknown optimizer '" + config.name + "'; use adamw or sgd");
}

}  // namespace shardlab::optim
