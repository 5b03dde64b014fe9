// DP and ZeRO-1/2/3 against the single-process run: same seed, same global batch, same
// losses step by step and the same parameters at the end, on every rank; with and
// without gradient accumulation and rematerialisation; plus the collectives each stage
// issues per step.
//
// Tolerance: the layouts differ from the single process only in fp32 summation order
// (a weight gradient summed over the whole batch in one matmul vs over each rank's rows
// and then across ranks), about 1e-7 relative per reduction. AdamW divides by sqrt(v),
// which can amplify such differences for elements with tiny gradients, so over 10 steps
// we allow 2e-5 relative on the loss and 2e-4 absolute on parameters of size ~0.02-1.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <map>
#include <memory>

#include "framework/data/arithmetic.h"
#include "framework/data/dataset.h"
#include "framework/memory.h"
#include "framework/ops.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/parallelize.h"
#include "parallel/train_step.h"
#include "tests/data_parallel_util.h"
#include "tests/parallel_run.h"
#include "tests/reference_run.h"

using namespace shardlab;
using namespace shardlab::parallel;
using namespace shardlab::testing;

namespace {

nn::ModelConfig tiny(nn::Remat remat) {
  nn::ModelConfig c = nn::ModelConfig::preset("gpt-tiny");
  c.remat = remat;
  return c;
}


// The single-process reference: the whole global batch on one rank, no MPI.
Run reference(nn::Remat remat, int accum) {
  return shardlab::testing::reference(tiny(remat), accum, 11);
}

Run distributed(const Mesh& mesh, int zero, nn::Remat remat, int accum, bool reshard = true,
                const optim::OptimizerConfig& optimizer = shardlab::testing::kStandardOptimizer, bool overlap = true) {
  const auto owned = deferred_tiny(remat);
  nn::Transformer& model = *owned;
  auto dp = parallelize(model, mesh,
                        {.data = {.zero = zero,
                                  .bucket_mb = 0.01,
                                  .overlap = overlap,
                                  .reshard_after_forward = reshard,
                                  .seed = 11}});
  const auto opt = shardlab::testing::standard_optimizer(dp, optimizer);
  return train_standard_run(model, dp, mesh, accum, opt.get());
}

void check_equal(const Run& ref, const Run& got) {
  check_losses_and_norms(ref, got, 2e-5);
  double worst = 0;
  for (const auto& [name, values] : ref.params) {
    const auto& mine = got.params.at(name);
    for (size_t i = 0; i < values.size(); ++i) worst = std::max(worst, double(std::abs(mine[i] - values[i])));
  }
  CHECK_MESSAGE(worst <= 2e-4, "largest parameter difference " << worst);
  // Replicas agree bit for bit: every rank's parameters equal rank 0's.
  for (const auto& [name, values] : got.params) {
    std::vector<float> root = values;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK_MESSAGE(root == values, name << " differs from rank 0's copy");
  }
}


}  // namespace

TEST_CASE("DP and ZeRO-1/2/3 train exactly like the single process") {
  for (nn::Remat remat :
       {nn::Remat::None, nn::Remat::Full, nn::Remat::SaveMatmulOutputs, nn::Remat::SaveMlpMatmulOutputs}) {
    for (int accum : {1, 2}) {
      const Run ref = reference(remat, accum);
      for (const std::string& spec : data_parallel_meshes()) {
        Mesh mesh(MPI_COMM_WORLD, spec);
        for (int zero = 0; zero <= 3; ++zero) {
          CAPTURE(spec);
          CAPTURE(zero);
          CAPTURE(accum);
          CAPTURE(nn::remat_name(remat));
          check_equal(ref, distributed(mesh, zero, remat, accum));
        }
        check_equal(ref, distributed(mesh, 3, remat, accum, /*reshard=*/false));
        // --overlap=false: no prefetched gathers, every reduce_scatter after backward
        check_equal(ref, distributed(mesh, 3, remat, accum, true, shardlab::testing::kStandardOptimizer, false));
      }
    }
  }
}

TEST_CASE("the optimizer is the caller's: SGD with momentum trains under every ZeRO stage as in one process") {
  // The strategies hand out parameter views and know nothing of the optimizer's update.
  optim::OptimizerConfig sgd;
  sgd.name = "sgd";
  sgd.sgd.momentum = 0.9f;
  const Run ref = shardlab::testing::reference(tiny(nn::Remat::None), 2, 11, sgd);
  for (const std::string& spec : data_parallel_meshes()) {
    Mesh mesh(MPI_COMM_WORLD, spec);
    for (int zero = 0; zero <= 3; ++zero) {
      CAPTURE(spec);
      CAPTURE(zero);
      check_equal(ref, distributed(mesh, zero, nn::Remat::None, 2, true, sgd));
    }
  }
}

TEST_CASE("every layout starts from the single process's weights; ZeRO-3 never holds the whole model") {
  nn::Transformer initialised(tiny(nn::Remat::None));
  nn::initialize(initialised, 11);
  const auto expect = snapshot(initialised);
  const int64_t numel = initialised.num_parameters();
  for (const std::string& spec : data_parallel_meshes()) {
    Mesh mesh(MPI_COMM_WORLD, spec);
    const int shards = DataAxes::of(mesh).shard->size();
    for (int zero = 0; zero <= 3; ++zero) {
      for (bool deferred : {true, false}) {
        CAPTURE(spec);
        CAPTURE(zero);
        CAPTURE(deferred);
        MemoryTracker::reset_peaks();
        const int64_t before = MemoryTracker::live(MemoryCategory::Parameters);
        std::unique_ptr<nn::Transformer> model = deferred ? deferred_tiny()
                                                           : std::make_unique<nn::Transformer>(tiny(nn::Remat::None));
        if (!deferred) nn::initialize(*model, 11);
        DataParallelConfig config;
        config.zero = zero;
        config.seed = 11;
        auto dp = parallelize(*model, mesh, {.data = config});
        const int64_t peak = MemoryTracker::peak(MemoryCategory::Parameters) - before;
        if (zero == 3 && deferred) {
          // Only this rank's slice of each of the units (root + one per block), padded.
          const int64_t units = 1 + tiny(nn::Remat::None).n_layers;
          CHECK_MESSAGE(peak <= static_cast<int64_t>(sizeof(float)) * (numel / shards + units),
                        "parameter peak " << peak << " B while building ZeRO-3 over " << shards << " of " << numel
                                          << " parameters");
        }
        dp.gather_full_params();
        CHECK(snapshot(*model) == expect);
        dp.release_full_params();
      }
    }
  }
}

TEST_CASE("each stage issues the collectives it should, once per step") {
  const int n = world_size();
  if (n == 1) return;  // size-1 groups communicate nothing
  Mesh mesh(MPI_COMM_WORLD, "data=" + std::to_string(n));
  const int64_t layers = tiny(nn::Remat::None).n_layers;
  for (int zero = 0; zero <= 4; ++zero) {  // 4: ZeRO-3 keeping parameters from forward to backward
    nn::Transformer model(tiny(nn::Remat::None));
    nn::initialize(model, 11);
    DataParallelConfig config;
    config.zero = std::min(zero, 3);
    config.bucket_mb = 0.01;
    config.reshard_after_forward = zero != 4;
    auto dp = parallelize(model, mesh, {.data = config});
    optim::AdamW optimizer(dp.parameters());
    data::BatchLoader loader(arithmetic_dataset(), kBatch, kSeq, mesh.rank(), n);
    data::Batch b = loader.next();
    mesh.context().trace.clear();
    mesh.context().trace.set_recording(true);
    dp.begin_microbatch();
    model.loss(b.inputs, b.targets, b.rows, b.seq_len).backward();
    dp.finish_gradients();
    optimizer.step(kLr);
    dp.finish_step();
    mesh.context().trace.set_recording(false);
    std::map<CollectiveOp, int> count;
    for (const CommRecord& r : mesh.context().trace.events()) count[r.op]++;
    CAPTURE(zero);
    if (zero == 0) {
      CHECK(count[CollectiveOp::kAllGather] == 0);
      CHECK(count[CollectiveOp::kReduceScatter] == 0);
      CHECK(count[CollectiveOp::kAllReduce] > 1);  // several buckets at 0.01 MiB
    } else if (zero == 1) {
      CHECK(count[CollectiveOp::kAllGather] == count[CollectiveOp::kAllReduce]);  // one per bucket
      CHECK(count[CollectiveOp::kReduceScatter] == 0);
    } else if (zero == 2) {
      CHECK(count[CollectiveOp::kAllGather] == count[CollectiveOp::kReduceScatter]);
      CHECK(count[CollectiveOp::kAllReduce] == 0);
    } else if (zero == 4) {
      CHECK(count[CollectiveOp::kAllGather] == layers + 1);  // root + forward only
      CHECK(count[CollectiveOp::kReduceScatter] == layers + 1);
    } else {
      CHECK(count[CollectiveOp::kAllGather] == 2 * layers + 1);  // root + forward + backward
      CHECK(count[CollectiveOp::kReduceScatter] == layers + 1);
      CHECK(count[CollectiveOp::kAllReduce] == 0);
    }
  }
}
