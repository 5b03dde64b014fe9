// The dry-run plan (step_plan.h): every data- and expert-parallel layout's plan, made from parameter
// shapes alone, equals the collectives a real step then issues, entry for entry and in
// order; and ranks whose plans differ are stopped with an error naming where.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "framework/data/arithmetic.h"
#include "framework/data/dataset.h"
#include "framework/memory.h"
#include "optim/adamw.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/parallelize.h"
#include "parallel/train_step.h"
#include "parallel/comm/step_plan.h"
#include "tests/data_parallel_util.h"
#include "tests/user_error.h"

using namespace shardlab;
using namespace shardlab::parallel;
using shardlab::testing::data_parallel_meshes;
using shardlab::testing::deferred_tiny;
using shardlab::testing::world_size;

namespace {

// One training step as train_gpt runs it, with the trace on; its collectives in issue order.
std::vector<CommRecord> run_step(const Mesh& mesh, const ParallelConfig& config, int microbatches,
                                 std::unique_ptr<nn::Transformer> model = deferred_tiny()) {
  static data::ArithmeticTask task({.digits = 2, .seed = 5});
  auto dp = parallelize(*model, mesh, config);
  optim::AdamW optimizer(dp.parameters());
  const DataAxes axes = DataAxes::of(mesh);
  data::BatchLoader loader(task.train(), 8, 16, axes.all->rank(), axes.all->size());
  const data::Batch batch = loader.next();
  mesh.context().trace.clear();
  mesh.context().trace.set_recording(true);
  train_step(*model, dp, optimizer, batch, microbatches, 1e-3f, 1.0);
  mesh.context().trace.set_recording(false);
  std::vector<CommRecord> events = mesh.context().trace.events();
  std::stable_sort(events.begin(), events.end(), [](const CommRecord& a, const CommRecord& b) { return a.start < b.start; });
  return events;
}

}  // namespace

TEST_CASE("every layout's plan is the collectives a real step issues, in order") {
  for (const std::string& spec : data_parallel_meshes()) {
    Mesh mesh(MPI_COMM_WORLD, spec);
    for (int zero = 0; zero <= 3; ++zero) {
      for (int microbatches : {1, 2}) {
        // Stages 0-2: with and without overlap; stage 3: also without resharding after forward.
        for (int variant = 0; variant < (zero == 3 ? 3 : 2); ++variant) {
          DataParallelConfig config;
          config.zero = zero;
          config.bucket_mb = 0.01;
          config.overlap = variant != (zero == 3 ? 2 : 1);
          config.reshard_after_forward = zero != 3 || variant != 1;
          CAPTURE(spec);
          CAPTURE(zero);
          CAPTURE(microbatches);
          CAPTURE(variant);
          const auto model = deferred_tiny();
          const int64_t params_before = MemoryTracker::live(MemoryCategory::Parameters);
          const StepPlan plan = plan_step(*model, mesh, {.data = config}, {.batch = 8, .seq_len = 16, .microbatches = microbatches});
          CHECK(MemoryTracker::live(MemoryCategory::Parameters) == params_before);  // nothing allocated
          const std::vector<CommRecord> ran = run_step(mesh, {.data = config}, microbatches);
          REQUIRE(ran.size() == plan.size());
          for (size_t i = 0; i < plan.size(); ++i) {
            CAPTURE(i);
            CAPTURE(plan[i].what);
            CHECK(ran[i].group == plan[i].group);
            CHECK(ran[i].op == plan[i].op);
            CHECK(ran[i].bytes == plan[i].bytes);
          }
          check_plan_agreement(mesh, plan);  // the same code everywhere: no error
        }
      }
    }
  }
}

TEST_CASE("expert-parallel plans are the all_to_alls and reductions a real step issues, group by group") {
  const int n = world_size();
  if (n == 1) return;
  std::vector<std::string> specs{"data=1,expert=" + std::to_string(n)};
  if (n == 4) specs.push_back("data=2,expert=2");
  for (const std::string& spec : specs) {
    Mesh mesh(MPI_COMM_WORLD, spec);
    for (int zero = 0; zero <= 3; ++zero) {
      for (nn::Remat remat : {nn::Remat::None, nn::Remat::Full}) {
        CAPTURE(spec);
        CAPTURE(zero);
        ParallelConfig config;
        config.data.zero = zero;
        config.data.bucket_mb = 0.01;
        nn::ModelConfig c = nn::ModelConfig::preset("llama-moe-tiny");
        c.remat = remat;
        const auto deferred = [&] { return nn::deferred_transformer(c); };
        const StepPlan plan = plan_step(*deferred(), mesh, config, {.batch = 8, .seq_len = 16, .microbatches = 2});
        const std::vector<CommRecord> ran = run_step(mesh, config, 2, deferred());
        // Collectives on different groups run in parallel: the order that counts is each group's.
        for (const std::string& group : {std::string("expert"), DataAxes::of(mesh).all->name()}) {
          CAPTURE(group);
          std::vector<const PlannedCollective*> planned;
          std::vector<const CommRecord*> issued;
          for (const auto& e : plan) if (e.group == group) planned.push_back(&e);
          for (const auto& e : ran) if (e.group == group) issued.push_back(&e);
          REQUIRE(issued.size() == planned.size());
          for (size_t i = 0; i < planned.size(); ++i) {
            CAPTURE(planned[i]->what);
            CHECK(issued[i]->op == planned[i]->op);
            CHECK(issued[i]->bytes == planned[i]->bytes);
          }
        }
        check_plan_agreement(mesh, plan);
      }
    }
  }
}

TEST_CASE("ranks whose plans differ get an error naming the group and the entry, on every rank") {
  const int n = world_size();
  if (n == 1) return;
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(n));
  StepPlan plan = {{"data", CollectiveOp::kAllReduce, 1024, "grads bucket 0"},
                   {"data", CollectiveOp::kAllReduce, 2048, "grads bucket 1"}};
  if (mesh.rank() == n - 1) plan[1].bytes = 4096;  // the last rank's bucket 1 differs
  const std::string message = shardlab::testing::user_error_of([&] { check_plan_agreement(mesh, plan); });
  CHECK(message.find("group 'data'") != std::string::npos);
  CHECK(message.find("entry 1") != std::string::npos);
  CHECK(message.find("4096") != std::string::npos);
  CHECK(message.find("2048") != std::string::npos);
  CHECK(message.find("rank " + std::to_string(n - 1)) != std::string::npos);
  // A rank whose plan stops early is caught too.
  StepPlan shorter = {{"data", CollectiveOp::kAllReduce, 1024, "grads bucket 0"}};
  if (mesh.rank() != 0) shorter.push_back({"data", CollectiveOp::kAllReduce, 2048, "grads bucket 1"});
  CHECK(shardlab::testing::user_error_of([&] { check_plan_agreement(mesh, shorter); }).find("ends there") !=
        std::string::npos);
}
