// dry_run: train_gpt --dry-run. Plans one training step of the configured layout from
// the parameter shapes alone (nothing is allocated, no model runs, no collective but the
// check), checks that every rank plans the same collectives on every group it shares,
// and prints rank 0's plan with each collective's predicted time on the emulated links
// (--link-profile, --link-scale) and the predicted step (docs/usage.md, "Dry run").
#pragma once

#include "parallel/runtime/run_config.h"
#include "framework/nn/transformer.h"
#include "parallel/comm/mesh.h"
#include "parallel/comm/step_plan.h"

namespace shardlab::runtime {

// The collectives of one train_gpt step: the layout's (plan_data_parallel_step) and the
// loss all_reduce. The model may be deferred.
parallel::StepPlan plan_train_step(const RunConfig& run, const parallel::Mesh& mesh, nn::Transformer& model);

// Collective; throws UserError on every rank if the ranks' plans disagree.
void dry_run(const RunConfig& run, const parallel::Mesh& mesh, nn::Transformer& model);

}  // namespace shardlab::runtime
