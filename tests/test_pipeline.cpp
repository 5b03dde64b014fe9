// Pipeline parallelism against the single-process run: same seed, same global batch, the
// same loss and pre-clip gradient norm step by step on every rank, and every parameter
// equal to the single process's after the steps; for GPT (tied embedding on the first
// and last stage) and LLaMA, with each schedule, an uneven split, remat, and with data
// parallelism / ZeRO-1/2 and tensor parallelism beside the pipe axis. Also: the tied
// embedding bit-identical on the first and last stage, the step plan agreed by every
// rank, and the layout errors.
//
// Tolerance as in test_tensor_parallel.cpp: the layouts differ only in fp32 summation
// order (the tied embedding's two halves are summed after the schedule).
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "framework/data/arithmetic.h"
#include "framework/data/dataset.h"
#include "framework/ops.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/step_plan.h"
#include "parallel/layout.h"
#include "parallel/parallelize.h"
#include "parallel/train_step.h"
#include "tests/mpi_test_util.h"
#include "tests/parallel_run.h"
#include "tests/reference_run.h"
#include "tests/user_error.h"

using namespace shardlab;
using namespace shardlab::parallel;
using namespace shardlab::testing;

namespace {

constexpr uint64_t kSeed = 13;

// 4 blocks, so that pipe=4 and pipe=2 x 2 virtual stages each get one.
nn::ModelConfig model_config(nn::Arch arch, nn::Remat remat = nn::Remat::None, int64_t layers = 4) {
  return small_model(arch, remat, layers);
}

Run reference(const nn::ModelConfig& c, int accum) { return shardlab::testing::reference(c, accum, kSeed); }

// A pipelined run, and what this rank held after the steps (its stages' parameters).
struct PipelineRun : Run {
  Params local;
};

struct Case {
  std::string mesh;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  int virtual_stages = 1;
  std::vector<int64_t> layers = {};
  int zero = 0;
};

PipelineRun distributed(const Mesh& mesh, const nn::ModelConfig& c, const Case& k, int accum) {
  const auto model = nn::deferred_transformer(c);
  ParallelConfig config;
  config.data.zero = k.zero;
  config.data.bucket_mb = 0.01;
  config.data.seed = kSeed;
  config.pipeline = {.schedule = k.schedule, .virtual_stages = k.virtual_stages, .microbatches = accum,
                     .layers = k.layers};
  // Every rank plans the same collectives on each group it shares.
  check_plan_agreement(mesh, plan_step(*model, mesh, config, {.batch = kBatch, .seq_len = kSeq, .microbatches = accum}));
  const ParallelModel strategy = parallelize(*model, mesh, config);
  PipelineRun r{train_standard_run(*model, strategy, mesh, accum), snapshot(*model)};
  return r;
}

void check_equal(const Mesh& mesh, const nn::ModelConfig& c, const Run& ref, const PipelineRun& got, bool tensor) {
  check_losses_and_norms(ref, got);
  if (!tensor) {  // (under tensor parallelism the gathered parameters are this rank's shards)
    double worst = 0;
    for (const auto& [name, values] : ref.params) {
      const std::vector<float>& mine = got.params.at(name);
      CHECK_MESSAGE(mine.size() == values.size(), name << ": " << mine.size() << " elements, expected " << values.size());
      if (mine.size() != values.size()) continue;  // no REQUIRE: every rank must reach the collectives below
      for (size_t i = 0; i < values.size(); ++i) worst = std::max(worst, double(std::abs(mine[i] - values[i])));
    }
    CHECK_MESSAGE(worst <= 2e-4, "largest parameter difference " << worst);
  }
  // A rank holds only its stages' parameters, and the tied embedding on the first and the
  // last stage is the same bit for bit.
  const AxisGroup& pipe = mesh.axis("pipe");
  const bool first = pipe.rank() == 0, holds_head = got.local.contains("norm_f.weight");
  CHECK(got.local.contains("wte.weight") == (first || (holds_head && c.arch == nn::Arch::Gpt)));
  CHECK(got.local.size() < ref.params.size());
  std::vector<float> wte = got.params.at("wte.weight");
  MPI_Bcast(wte.data(), static_cast<int>(wte.size()), MPI_FLOAT, 0, pipe.comm());
  if (got.local.contains("wte.weight")) CHECK_MESSAGE(wte == got.local.at("wte.weight"), "tied embedding differs");
}

// The pipeline layouts of this job.
std::vector<Case> cases() {
  using K = ScheduleKind;
  const int n = world_size();
  if (n == 2) {
    return {{"data=1,pipe=2", K::kGPipe},
            {"data=1,pipe=2", K::k1F1B},
            {"data=1,pipe=2", K::kInterleaved, 2},
            {"data=1,pipe=2", K::kZeroBubble},
            {"data=1,pipe=2", K::k1F1B, 1, {1, 3}}};
  }
  if (n == 4) {
    return {{"data=1,pipe=4", K::kGPipe},
            {"data=1,pipe=4", K::k1F1B},
            {"data=1,pipe=4", K::kZeroBubble},
            {"data=2,pipe=2", K::kZeroBubble, 1, {}, 1},
            {"data=2,pipe=2", K::k1F1B, 1, {}, 0},
            {"data=2,pipe=2", K::k1F1B, 1, {}, 1},
            {"data=2,pipe=2", K::kInterleaved, 2, {}, 2},
            {"data=1,pipe=2,tensor=2", K::k1F1B}};
  }
  return {};
}

}  // namespace

TEST_CASE("pipeline parallelism trains exactly like the single process") {
  for (nn::Arch arch : {nn::Arch::Gpt, nn::Arch::Llama}) {
    for (auto [remat, accum] : {std::pair{nn::Remat::None, 4}, std::pair{nn::Remat::Full, 2},
                                std::pair{nn::Remat::SaveMatmulOutputs, 4}}) {
      const nn::ModelConfig c = model_config(arch, remat);
      const Run ref = reference(c, accum);
      for (const Case& k : cases()) {
        CAPTURE(k.mesh);
        CAPTURE(to_string(k.schedule));
        CAPTURE(k.virtual_stages);
        CAPTURE(k.zero);
        CAPTURE(accum);
        CAPTURE(nn::arch_name(arch));
        CAPTURE(nn::remat_name(remat));
        const Layout layout = Layout::from_spec(k.mesh);
        if (accum % layout.pipe != 0 && k.schedule == ScheduleKind::kInterleaved) continue;
        Mesh mesh(MPI_COMM_WORLD, k.mesh);
        mesh.context().watchdog.set_timeout(15);
        check_equal(mesh, c, ref, distributed(mesh, c, k, accum), layout.tensor > 1);
      }
    }
  }
}

TEST_CASE("interleaved over four ranks: eight stages of one block each") {
  if (world_size() != 4) return;
  for (nn::Arch arch : {nn::Arch::Gpt, nn::Arch::Llama}) {
    const nn::ModelConfig c = model_config(arch, nn::Remat::None, 8);
    const Run ref = reference(c, 4);
    const Case k{"data=1,pipe=4", ScheduleKind::kInterleaved, 2};
    CAPTURE(nn::arch_name(arch));
    Mesh mesh(MPI_COMM_WORLD, k.mesh);
    mesh.context().watchdog.set_timeout(15);
    check_equal(mesh, c, ref, distributed(mesh, c, k, 4), false);
  }
}

TEST_CASE("the cost-balanced split puts fewer blocks on the stage with the head") {
  nn::ModelConfig c = model_config(nn::Arch::Gpt);
  c.n_layers = 6;
  c.vocab = 4096;  // a head as costly as several blocks
  const std::vector<int64_t> first = stage_boundaries(c, 2, {});
  REQUIRE(first.size() == 3);
  CHECK(first.front() == 0);
  CHECK(first.back() == 6);
  CHECK(first[1] >= 4);  // the first stage takes the larger share
  CHECK(stage_boundaries(c, 3, {1, 2, 3}) == std::vector<int64_t>{0, 1, 3, 6});
}

// Under --activation-dtype bf16 (the default of --precision bf16) the activations and
// their gradients travel between stages as bf16: every such message is
// pipeline_message_bytes, half of fp32's; the tied embedding's gradient exchange stays fp32.
TEST_CASE("pipeline messages in bf16 carry half the bytes of fp32's, as planned; the tied embedding stays fp32") {
  const int n = world_size();
  Mesh mesh(MPI_COMM_WORLD, "data=1,pipe=" + std::to_string(n));
  const nn::ModelConfig c = model_config(nn::Arch::Gpt);  // a tied embedding
  const int accum = 2;
  std::map<DType, int64_t> message;
  for (DType wire : {DType::kF32, DType::kBF16}) {
    CAPTURE(std::string(dtype_name(wire)));
    const auto model = nn::deferred_transformer(c);
    ParallelConfig config;
    config.data.seed = kSeed;
    config.pipeline.microbatches = accum;
    config.precision.activation = wire;
    const ParallelModel strategy = parallelize(*model, mesh, config);
    const auto optimizer = standard_optimizer(strategy);
    data::BatchLoader loader(arithmetic_dataset(), kBatch, kSeq);
    mesh.context().trace.clear();
    mesh.context().trace.set_recording(true);
    train_step(*model, strategy, *optimizer, loader.next(), accum, kLr, 1.0);
    mesh.context().trace.set_recording(false);
    message[wire] = pipeline_message_bytes(c, mesh, config, {.batch = kBatch, .seq_len = kSeq, .microbatches = accum});
    const int64_t tied = c.vocab * c.d_model * 4;
    int messages = 0, tied_messages = 0, other = 0;
    for (const CommRecord& r : mesh.context().trace.events()) {
      if (r.group != "pipe" || (r.op != CollectiveOp::kSend && r.op != CollectiveOp::kRecv)) continue;
      (r.bytes == message[wire] ? messages : r.bytes == tied ? tied_messages : other)++;
    }
    const int rank = mesh.axis("pipe").rank();
    const bool end = rank == 0 || rank == n - 1;
    CHECK(messages == (end ? 2 : 4) * accum);  // each microbatch's activation one way, its gradient back
    CHECK(tied_messages == (end ? 2 : 0));
    CHECK(other == 0);
  }
  CHECK(message[DType::kBF16] * 2 == message[DType::kF32]);
}

TEST_CASE("pipeline layouts the model or schedule cannot take are clear errors on every rank") {
  const auto error = [](const std::string& spec, auto&& change) {
    Layout layout = Layout::from_spec(spec);
    LayoutChecks checks;
    checks.model = model_config(nn::Arch::Gpt);
    change(layout, checks);
    return user_error_of([&] { layout.validate(checks); });
  };
  CHECK(error("pipe=4", [](Layout& l, LayoutChecks&) { l.virtual_stages = 2; })
            .find("4 layers cannot fill pipe x virtual stages = 4 x 2 = 8") != std::string::npos);
  CHECK(error("pipe=2", [](Layout&, LayoutChecks& c) { c.pipeline_layers = {1, 2}; })
            .find("summing to 3 layers; give 2 positive counts") != std::string::npos);
  CHECK(error("pipe=2", [](Layout& l, LayoutChecks&) { l.zero = 3; }).find("use ZeRO stage 1 or 2 with a pipe axis") !=
        std::string::npos);
  CHECK(error("pipe=2", [](Layout& l, LayoutChecks&) {
          l.microbatches = 3;
          l.schedule = ScheduleKind::kInterleaved;
          l.virtual_stages = 2;
        }).find("--grad-accum a multiple of 2") != std::string::npos);
  CHECK(error("data=2", [](Layout& l, LayoutChecks&) { l.virtual_stages = 2; }).find("need a pipe axis") !=
        std::string::npos);
}
