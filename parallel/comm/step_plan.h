// StepPlan: the collectives one training step issues on this rank, in issue order, known
// before anything runs (the dry run, docs/usage.md).
//
// A strategy derives its plan from the parameter shapes and the layout alone -- no
// parameter is allocated, no model runs -- so a layout can be checked for a model far
// larger than the machine (`train_gpt --dry-run`). Ranks that disagree about the
// collectives of a group they share are the usual cause of hangs: check_plan_agreement
// compares every rank's plan with the others of each group before the first real
// collective, and names the first entry where they part.
//
//   StepPlan plan = plan_data_parallel_step(model, mesh, config, /*microbatches=*/2);
//   check_plan_agreement(mesh, plan);                 // UserError on every rank if not
//   if (mesh.rank() == 0) std::cout << format_plan(mesh, plan);
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "parallel/comm/collective_types.h"

namespace shardlab::parallel {

class Mesh;

// The computation a collective can run behind when the strategy overlaps (--overlap):
// issued while forward or backward still has work to do, or (kNothing) when nothing is
// left to hide it -- a step's first gather, its last bucket, anything after backward.
enum class Hides { kNothing, kForward, kBackward };

struct PlannedCollective {
  std::string group;  // AxisGroup name: "data", "data+fsdp"
  CollectiveOp op;
  int64_t bytes;      // as the trace counts them (collectives.h)
  std::string what;   // what travels: "grads bucket 2", "params block 3", "loss"
  Hides hides = Hides::kNothing;
};

using StepPlan = std::vector<PlannedCollective>;

// Appends `entry` unless its group has a single rank (size-1 groups communicate nothing
// and record nothing).
void add_planned(StepPlan& plan, const Mesh& mesh, PlannedCollective entry);

// Collective over the mesh: every group named in any rank's plan must see, from each of
// its ranks, the same sequence of (op, bytes) on it. Throws the same UserError on every
// rank otherwise, naming the group, the position and both ranks' entries.
void check_plan_agreement(const Mesh& mesh, const StepPlan& plan);

// One line per entry with its predicted seconds on the mesh's emulated links, then the
// totals per group.
std::string format_plan(const Mesh& mesh, const StepPlan& plan);

// Predicted seconds of the plan's collectives on the mesh's emulated links, per group
// and in all, as if none overlapped.
std::map<std::string, double> planned_seconds_by_group(const Mesh& mesh, const StepPlan& plan);
double planned_seconds(const Mesh& mesh, const StepPlan& plan);
double planned_seconds(const Mesh& mesh, const PlannedCollective& entry);

// Predicted seconds of the plan's collectives on `groups` that stay exposed, given a
// step's forward and backward compute: the entries that hide behind nothing, plus how far
// the forward (backward) entries run past the forward (backward) compute, each issued in
// proportion to the phase's bytes before it (a gather before the compute it feeds, a
// reduction after the compute that produced it) on links that carry one transfer at a
// time. With overlap = false, all of them.
double planned_exposed_seconds(const Mesh& mesh, const StepPlan& plan, const std::set<std::string>& groups,
                               double forward_seconds, double backward_seconds, bool overlap);

}  // namespace shardlab::parallel
