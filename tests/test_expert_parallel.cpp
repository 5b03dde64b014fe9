// Expert parallelism against the single-process run: same seed, same global batch, the
// same loss, load-balancing loss, dropped-token count and pre-clip gradient norm step by
// step on every rank, and every parameter equal after the steps (experts gathered from
// their ranks through a checkpoint). For Switch-style top-1 (GPT) and Mixtral-style top-2
// (LLaMA), with a capacity that drops tokens and dropless, with gradient accumulation
// and remat, at expert=2, expert=4 and data=2 x expert=2, with ZeRO stages 0-3 (the
// experts' optimizer state, gradients and parameters sharded within their expert group),
// inside pipeline stages (pipe=2 x expert=2), and with tensor parallelism splitting each
// expert's hidden units (tensor=2, expert=2 x tensor=2). Also: the all_to_all bytes of
// each MoE layer equal the formula, a router that sends every token to one expert still
// runs (drops counted, no hang), and the layout errors.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <memory>

#include "framework/autograd.h"
#include "framework/checkpoint.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/step_plan.h"
#include "parallel/expert/expert_parallel.h"
#include "parallel/layout.h"
#include "parallel/checkpoint/distributed_checkpoint.h"
#include "parallel/parallelize.h"
#include "parallel/train_step.h"
#include "tests/mpi_test_util.h"
#include "tests/parallel_run.h"
#include "tests/reference_run.h"
#include "tests/temp_dir.h"
#include "tests/user_error.h"

using namespace shardlab;
using namespace shardlab::parallel;
using namespace shardlab::testing;

namespace {

constexpr uint64_t kSeed = 17;

struct Case {
  std::string preset;     // gpt-moe-tiny (k=1) or llama-moe-tiny (k=2), E=4
  float capacity = 1.0f;  // 1.0 drops tokens in this run; 0: dropless
  int accum = 1;
  nn::Remat remat = nn::Remat::None;
  int zero = 0;
};

nn::ModelConfig config_of(const Case& k) {
  nn::ModelConfig c = nn::ModelConfig::preset(k.preset);
  c.capacity_factor = k.capacity;
  c.remat = k.remat;
  return c;
}

struct ExpertRun : Run {
  int64_t expert_bytes = 0;  // all_to_all bytes on the expert axis over the training steps
};

ExpertRun distributed(const Mesh& mesh, const Case& k, const std::string& checkpoint) {
  const nn::ModelConfig c = config_of(k);
  const auto model = nn::deferred_transformer(c);
  ParallelConfig config;
  config.data.bucket_mb = 0.01;
  config.data.zero = k.zero;
  config.data.seed = kSeed;
  config.pipeline.microbatches = k.accum;
  check_plan_agreement(mesh, plan_step(*model, mesh, config, {.batch = kBatch, .seq_len = kSeq, .microbatches = k.accum}));
  const ParallelModel strategy = parallelize(*model, mesh, config);
  mesh.context().trace.clear();
  mesh.context().trace.set_recording(true);
  const auto optimizer = standard_optimizer(strategy);
  ExpertRun r{train_standard_run(*model, strategy, mesh, k.accum, optimizer.get())};
  for (const CommRecord& e : mesh.context().trace.events()) {
    if (e.group == "expert" && e.op == CollectiveOp::kAllToAll) r.expert_bytes += e.bytes;
  }
  mesh.context().trace.set_recording(false);
  save_checkpoint(mesh, strategy, *optimizer, checkpoint, [](CheckpointSink& w) { w.set_attribute("step", int64_t{kSteps}); });
  return r;
}

// The whole model as the checkpoint stores it (unsharded), read on every rank.
Params read_checkpoint(const std::string& path, const Params& like) {
  CheckpointReader reader(path);
  Params out;
  for (const auto& [name, values] : like) {
    std::vector<float> v(values.size());
    reader.read("params/" + name, reader.shape("params/" + name), v);
    out[name] = std::move(v);
  }
  return out;
}

void check_case(const Mesh& mesh, const Case& k) {
  INFO("mesh " << mesh.describe() << ", " << k.preset << ", capacity factor " << k.capacity << ", " << k.accum
               << " microbatches, remat " << nn::remat_name(k.remat) << ", ZeRO " << k.zero);
  const Run ref = reference(config_of(k), k.accum, kSeed);
  TempDir dir;
  std::string path = dir.file("ckpt.h5");
  // Every rank writes and reads the same path: rank 0's name.
  std::vector<char> name(path.begin(), path.end());
  name.resize(512, '\0');
  MPI_Bcast(name.data(), 512, MPI_CHAR, 0, MPI_COMM_WORLD);
  path = name.data();
  const ExpertRun got = distributed(mesh, k, path);
  check_losses_and_norms(ref, got);
  if (k.capacity > 0) CHECK_MESSAGE(ref.dropped[0] > 0, "the case should drop tokens");
  else CHECK(ref.dropped[0] == 0);
  // Per microbatch and MoE layer: dispatch and combine forward, their gradients backward
  // (and the forward again under remat), each one buffer of E*S*C*D floats.
  const nn::ModelConfig c = config_of(k);
  const int64_t rows = kBatch / DataAxes::of(mesh).all->size() / k.accum;
  const int64_t per_layer = (c.remat == nn::Remat::None ? 4 : 6) * expert_all_to_all_bytes(c, rows, kSeq);
  const int64_t stages = mesh.has_axis("pipe") ? mesh.axis_size("pipe") : 1;  // each holds its share of the layers
  const bool expert_axis = mesh.has_axis("expert") && mesh.axis_size("expert") > 1;
  const int64_t planned = expert_axis ? kSteps * k.accum * c.moe_layers() / stages * per_layer : 0;
  if (k.capacity > 0 || !expert_axis) {
    CHECK(got.expert_bytes == planned);
  } else {  // dropless: the buffers hold what the fullest expert needs, under the plan's bound of T slots
    CHECK(got.expert_bytes > 0);
    CHECK(got.expert_bytes < planned);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Params saved = read_checkpoint(path, ref.params);
  double worst = 0;
  for (const auto& [pname, values] : ref.params) {
    for (size_t i = 0; i < values.size(); ++i) worst = std::max(worst, double(std::abs(saved.at(pname)[i] - values[i])));
  }
  CHECK_MESSAGE(worst <= 2e-4, "largest parameter difference " << worst << " after the steps");
  MPI_Barrier(MPI_COMM_WORLD);  // nobody removes the directory while another rank reads it
}

}  // namespace

TEST_CASE("expert parallelism trains exactly like the single process") {
  const int n = world_size();
  std::vector<std::pair<std::string, Case>> cases;
  if (n == 2) {
    cases = {{"expert=2", {"gpt-moe-tiny"}},
             {"expert=2", {"llama-moe-tiny"}},
             {"expert=2", {"gpt-moe-tiny", 0.0f}},
             {"expert=2", {"llama-moe-tiny", 0.0f, 2}},
             {"expert=2", {"llama-moe-tiny", 1.0f, 2, nn::Remat::Full}},
             {"expert=2", {"gpt-moe-tiny", 1.0f, 1, nn::Remat::None, 1}},
             {"expert=2", {"llama-moe-tiny", 1.0f, 2, nn::Remat::Full, 3}},
             {"tensor=2", {"gpt-moe-tiny"}},
             {"tensor=2", {"llama-moe-tiny", 1.0f, 2, nn::Remat::Full}}};
  } else if (n == 4) {
    cases = {{"expert=4", {"gpt-moe-tiny"}},
             {"expert=4", {"llama-moe-tiny", 0.0f}},
             {"data=2,expert=2", {"llama-moe-tiny"}},
             {"data=2,expert=2", {"gpt-moe-tiny", 1.0f, 2}},
             {"data=2,expert=2", {"llama-moe-tiny", 1.0f, 1, nn::Remat::None, 1}},
             {"data=2,expert=2", {"gpt-moe-tiny", 0.0f, 2, nn::Remat::None, 2}},
             {"fsdp=2,expert=2", {"llama-moe-tiny", 1.0f, 1, nn::Remat::None, 2}},
             {"data=2,expert=2", {"gpt-moe-tiny", 1.0f, 1, nn::Remat::None, 3}},
             {"data=2,expert=2", {"llama-moe-tiny", 0.0f, 2, nn::Remat::None, 3}},
             {"pipe=2,expert=2", {"llama-moe-tiny", 1.0f, 2}},
             {"pipe=2,expert=2", {"gpt-moe-tiny", 1.0f, 4, nn::Remat::Full, 1}},
             {"expert=2,tensor=2", {"gpt-moe-tiny"}},
             {"expert=2,tensor=2", {"llama-moe-tiny", 0.0f, 2, nn::Remat::None, 3}},
             {"expert=2,tensor=2", {"llama-moe-tiny", 1.0f, 1, nn::Remat::Full, 2}}};
  }
  for (const auto& [spec, k] : cases) {
    Layout layout = Layout::from_spec(spec);
    layout.microbatches = k.accum;
    layout.zero = k.zero;
    layout.validate({.model = config_of(k), .global_batch = kBatch}, n);
    Mesh mesh(MPI_COMM_WORLD, layout.axes);
    check_case(mesh, k);
  }
}

// Under --activation-dtype bf16 (the default of --precision bf16) the dispatch and combine
// all_to_alls, forward and backward, carry bf16: the step plan's entries on the expert axis
// match the trace one by one, and each all_to_all is half the fp32 bytes.
TEST_CASE("in bf16 the all_to_alls carry half the bytes of fp32's, as the step plan says") {
  const int n = world_size();
  Mesh mesh(MPI_COMM_WORLD, Layout::from_spec("expert=" + std::to_string(n)).axes);
  const Case k{"llama-moe-tiny", 1.0f, 2, nn::Remat::Full};
  const nn::ModelConfig c = config_of(k);
  std::map<DType, int64_t> traced;
  for (DType wire : {DType::kF32, DType::kBF16}) {
    CAPTURE(std::string(dtype_name(wire)));
    const auto model = nn::deferred_transformer(c);
    ParallelConfig config;
    config.data.seed = kSeed;
    config.pipeline.microbatches = k.accum;
    config.precision.activation = wire;
    const StepPlan plan = plan_step(*model, mesh, config, {.batch = kBatch, .seq_len = kSeq, .microbatches = k.accum});
    const ParallelModel strategy = parallelize(*model, mesh, config);
    const auto optimizer = standard_optimizer(strategy);
    data::BatchLoader loader(arithmetic_dataset(), kBatch, kSeq, mesh.coord("expert"), n);
    mesh.context().trace.clear();
    mesh.context().trace.set_recording(true);
    train_step(*model, strategy, *optimizer, loader.next(), k.accum, kLr, 1.0);
    mesh.context().trace.set_recording(false);
    std::vector<PlannedCollective> planned;
    for (const PlannedCollective& p : plan) {
      if (p.group == "expert" && p.op == CollectiveOp::kAllToAll) planned.push_back(p);
    }
    std::vector<CommRecord> ran;
    for (const CommRecord& r : mesh.context().trace.events()) {
      if (r.group == "expert" && r.op == CollectiveOp::kAllToAll) ran.push_back(r);
    }
    REQUIRE(ran.size() == planned.size());
    for (size_t i = 0; i < ran.size(); ++i) {
      CHECK_MESSAGE(ran[i].bytes == planned[i].bytes, "entry " << i << " (" << planned[i].what << ")");
      traced[wire] += ran[i].bytes;
    }
    CHECK(planned.front().bytes == expert_all_to_all_bytes(c, kBatch / n / k.accum, kSeq, wire));
  }
  CHECK(traced[DType::kF32] > 0);
  CHECK(traced[DType::kBF16] * 2 == traced[DType::kF32]);
}

TEST_CASE("a router that sends every token to one expert runs, drops what it must, and agrees") {
  const int n = world_size();
  const Layout layout = Layout::from_spec("expert=" + std::to_string(n));
  nn::ModelConfig c = nn::ModelConfig::preset("gpt-moe-tiny");
  c.capacity_factor = 1.0f;
  const auto build = [&] { return nn::deferred_transformer(c); };
  // Zero router weights: every expert ties and every token picks expert 0, on one rank.
  const auto zero_routers = [](nn::Transformer& m) {
    for (auto& b : m.blocks) {
      Tensor& w = b->moe->router.weight;
      std::fill(w.span().begin(), w.span().end(), 0.0f);
    }
  };
  nn::Transformer single(c);
  nn::initialize(single, kSeed);
  zero_routers(single);
  const auto ids = [] {
    std::vector<int32_t> v(kBatch * kSeq);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i % 200);
    return v;
  }();
  NoGradGuard no_grad;
  const double expected = single.loss(ids, ids, kBatch, kSeq).item();
  const int64_t capacity = nn::expert_capacity(c, kSeq);
  CHECK(single.moe_state->stats.dropped == c.n_layers * kBatch * (kSeq - capacity));

  layout.validate({.model = c, .global_batch = kBatch}, n);
  Mesh mesh(MPI_COMM_WORLD, layout.axes);
  auto model = build();
  ParallelConfig config;
  config.data.seed = kSeed;
  ParallelModel strategy = parallelize(*model, mesh, config);
  zero_routers(*model);
  const AxisGroup& all = *DataAxes::of(mesh).all;
  const int64_t rows = kBatch / all.size();
  const std::vector<int32_t> mine(ids.begin() + all.rank() * rows * kSeq, ids.begin() + (all.rank() + 1) * rows * kSeq);
  double loss = model->loss(mine, mine, rows, kSeq).item() / all.size();
  double dropped = static_cast<double>(model->moe_state->stats.dropped);
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &dropped, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  CHECK(loss == doctest::Approx(expected).epsilon(1e-5));
  CHECK(dropped == static_cast<double>(single.moe_state->stats.dropped));
}

TEST_CASE("expert layouts that cannot work are clear errors on every rank") {
  nn::ModelConfig moe = nn::ModelConfig::preset("llama-moe-tiny");  // E=4
  const auto error = [&](const std::string& spec, const nn::ModelConfig& c, int zero = 0) {
    Layout layout = Layout::from_spec(spec);
    layout.zero = zero;
    return user_error_of([&] { layout.validate({.model = c, .global_batch = kBatch}); });
  };
  CHECK(error("expert=3", moe).find("expert axis 3 does not divide the 4 experts") != std::string::npos);
  CHECK(error("expert=2", nn::ModelConfig::preset("llama-tiny")).find("needs a mixture-of-experts model") !=
        std::string::npos);
  CHECK(user_error_of([&] {
          Layout layout = Layout::from_spec("tensor=2");
          layout.sequence_parallel = true;
          layout.validate({.model = moe, .global_batch = kBatch});
        }).find("sequence parallelism with a mixture-of-experts model") != std::string::npos);
  nn::ModelConfig bad = moe;
  bad.top_k = 5;
  CHECK(user_error_of([&] { bad.validate(); }).find("--top-k 5 must be between 1 and the 4 experts") != std::string::npos);
  bad = moe;
  bad.capacity_factor = -1.0f;
  CHECK(user_error_of([&] { bad.validate(); }).find("--capacity-factor must be 0 (dropless) or positive") !=
        std::string::npos);
  CHECK(error("data=3,expert=2", moe).find("not divisible by the 6 ranks that split it") != std::string::npos);
}
