// Context parallelism against one process: ring and all-gather attention equal causal
// attention forward and backward on each rank's positions (head-tail balanced or not,
// multi-head and grouped-query), the gradient through the ring equals finite differences,
// and whole training runs give the single process's loss and pre-clip gradient norm step
// by step on every rank, alone and with data x ZeRO-1/2/3, fsdp, tensor (with sequence
// parallelism), pipe (1F1B, zero-bubble, interleaved), dropless MoE with and without an
// expert axis (its load-balancing loss the whole sequence's), remat and accumulation; the traced bytes on the context axis
// equal the formula, and layouts that cannot be cut are clear errors.
//
// Tolerance: the layouts differ only in fp32 summation order (the online softmax merges
// blocks in ring order): 1e-4 relative on losses and norms over 10 steps, as every
// strategy's test.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "framework/autograd.h"
#include "framework/ops.h"
#include "parallel/comm/comm_context.h"
#include "parallel/context/context_parallel.h"
#include "parallel/layout.h"
#include "parallel/parallelize.h"
#include "tests/gradcheck.h"
#include "tests/mpi_test_util.h"
#include "tests/parallel_run.h"
#include "tests/reference_run.h"
#include "tests/user_error.h"

using namespace shardlab;
using namespace shardlab::parallel;
using namespace shardlab::testing;

namespace {

constexpr uint64_t kSeed = 23;

// Rows `positions` of x[B, T, C], in that order: a rank's slice of every sequence.
Tensor rows_at(const Tensor& x, const std::vector<int64_t>& positions) {
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), n = static_cast<int64_t>(positions.size());
  Tensor out = Tensor::empty({B, n, C});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(x.data() + (b * T + positions[i]) * C, C, out.data() + (b * n + i) * C);
  }
  return out;
}

double max_difference(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, double(std::abs(a.data()[i] - b.data()[i])));
  return worst;
}

struct Case {
  std::string spec;
  nn::Arch arch = nn::Arch::Gpt;
  ContextParallelConfig cp = {};
  int zero = 0;
  int accum = 1;
  nn::Remat remat = nn::Remat::None;
  TensorParallelConfig tp = {};
  ScheduleKind schedule = ScheduleKind::k1F1B;  // with a pipe axis; its microbatches are `accum`
  int virtual_stages = 1;
  int64_t layers = 2;
  std::string moe = "";  // an MoE preset, dropless, instead of small_model(arch)
};

nn::ModelConfig config_of(const Case& k) {
  if (k.moe.empty()) return small_model(k.arch, k.remat, k.layers);
  nn::ModelConfig c = nn::ModelConfig::preset(k.moe);
  c.capacity_factor = 0.0f;  // a capacity counts whole sequences
  c.remat = k.remat;
  return c;
}

std::string describe(const Case& k) {
  return k.spec + " " + (k.moe.empty() ? nn::arch_name(k.arch) : k.moe) + " " + context_comm_name(k.cp.comm) +
         (k.cp.load_balance ? " balanced" : " contiguous") + " ZeRO-" + std::to_string(k.zero) + " accum " +
         std::to_string(k.accum) + " remat " + nn::remat_name(k.remat) + (k.tp.sequence_parallel ? " +SP" : "") +
         " schedule " + to_string(k.schedule);
}

// The bytes the context axis moves in one microbatch per attention layer, from the
// formula: a K/V block is rows x T/c positions x 2 K_local H floats; the ring passes
// c-1 of them forward and c-1 plus c key/value gradients backward; the all-gather
// variant gathers c blocks and reduce_scatters c gradients. Remat runs the forward again.
int64_t context_bytes_per_layer(const nn::ModelConfig& c, const Mesh& mesh, const ContextParallelConfig& cp,
                                int64_t rows) {
  const int n = mesh.axis_size(kContextAxis), t = mesh.size_of(kTensorAxis);
  const int64_t kv_heads = std::max<int64_t>(1, c.n_kv_heads / t);
  const int64_t block = rows * (kSeq / n) * 2 * kv_heads * c.head_dim() * 4;
  const int forwards = c.remat == nn::Remat::None ? 1 : 2;
  return cp.comm == ContextComm::kRing ? (forwards * (n - 1) + 2 * n - 1) * block : (forwards + 1) * n * block;
}

void check_case(const Case& k) {
  INFO(describe(k));
  const nn::ModelConfig c = config_of(k);
  Layout layout = Layout::from_spec(k.spec);
  layout.microbatches = k.accum;
  layout.zero = k.zero;
  layout.sequence_parallel = k.tp.sequence_parallel;
  layout.schedule = k.schedule;
  layout.virtual_stages = k.virtual_stages;
  layout.validate({.model = c, .global_batch = kBatch, .seq_len = kSeq, .context_load_balance = k.cp.load_balance},
                  world_size());
  Mesh mesh(MPI_COMM_WORLD, layout.axes);
  mesh.context().watchdog.set_timeout(30);
  const Run ref = reference(c, k.accum, kSeed);
  const auto model = nn::deferred_transformer(c);
  ParallelConfig config{.data = {.zero = k.zero, .bucket_mb = 0.01, .seed = kSeed}, .tensor = k.tp, .context = k.cp};
  config.pipeline.schedule = k.schedule;
  config.pipeline.virtual_stages = k.virtual_stages;
  config.pipeline.microbatches = k.accum;
  const StepPlan plan = plan_step(*model, mesh, config, {.batch = kBatch, .seq_len = kSeq, .microbatches = k.accum});
  check_plan_agreement(mesh, plan);
  const ParallelModel strategy = parallelize(*model, mesh, config);
  mesh.context().trace.clear();
  mesh.context().trace.set_recording(true);
  const Run got = train_standard_run(*model, strategy, mesh, k.accum);
  int64_t traced = 0, planned = 0;
  for (const CommRecord& e : mesh.context().trace.events()) traced += e.group == kContextAxis ? e.bytes : 0;
  for (const PlannedCollective& e : plan) planned += e.group == kContextAxis ? e.bytes : 0;
  mesh.context().trace.set_recording(false);
  check_losses_and_norms(ref, got);
  // Bytes: the formula, for every attention layer this rank runs (its stage's) and microbatch.
  const int64_t rows = kBatch / DataAxes::of(mesh).batch->size() / k.accum;
  const int64_t layers = c.n_layers / mesh.size_of(kPipeAxis);
  // An MoE layer also averages its rows x E load-balancing shares, once per forward.
  const int64_t moe_layers = c.experts > 0 ? c.moe_layers() / mesh.size_of(kPipeAxis) : 0;
  const int64_t moe_bytes = moe_layers * (k.remat == nn::Remat::None ? 1 : 2) * rows * c.experts * 4;
  CHECK(traced == int64_t{kSteps} * k.accum * (layers * context_bytes_per_layer(c, mesh, k.cp, rows) + moe_bytes));
  CHECK(planned * kSteps == traced);
  if (!mesh.splits(kTensorAxis) && !mesh.splits(kPipeAxis) && !mesh.splits(kExpertAxis)) {  // whole parameters
    double worst = 0;
    for (const auto& [name, values] : ref.params) {
      const std::vector<float>& mine = got.params.at(name);
      for (size_t i = 0; i < values.size(); ++i) worst = std::max(worst, double(std::abs(mine[i] - values[i])));
    }
    CHECK_MESSAGE(worst <= 2e-4, "largest parameter difference " << worst);
  }
}

}  // namespace

TEST_CASE("ring and all-gather attention equal causal attention on each rank's positions, forward and backward") {
  const int c = world_size();
  if (c == 1) return;
  Mesh mesh(MPI_COMM_WORLD, "context=" + std::to_string(c));
  const AxisGroup& axis = mesh.axis(kContextAxis);
  for (auto [N, K] : {std::pair{4, 4}, std::pair{4, 2}, std::pair{4, 1}}) {
    const int64_t B = 2, T = 8 * c, H = 4;
    const Tensor qkv = random_tensor({B, T, (N + 2 * K) * H}, 51);  // the same whole sequences on every rank
    const Tensor dy = random_tensor({B, T, N * H}, 52);
    Tensor whole = qkv.clone();
    whole.set_requires_grad(true);
    const Tensor y_ref = ops::causal_attention(whole, N, K);
    run_backward(y_ref, dy);
    for (const bool balance : {true, false}) {
      for (const ContextComm comm : {ContextComm::kRing, ContextComm::kAllGather}) {
        CAPTURE(N);
        CAPTURE(K);
        CAPTURE(balance);
        CAPTURE(context_comm_name(comm));
        const SequenceSplit split{.size = c, .load_balance = balance};
        const std::vector<int64_t> mine = split.positions(axis.rank(), T / c);
        Tensor local = rows_at(qkv, mine);
        local.set_requires_grad(true);
        const Tensor y = context_attention(axis, split, {.comm = comm, .load_balance = balance}, local, N, K);
        CHECK(max_difference(y, rows_at(y_ref, mine)) <= 1e-5);
        run_backward(y, rows_at(dy, mine));
        CHECK(max_difference(local.grad(), rows_at(whole.grad(), mine)) <= 2e-5);
      }
    }
  }
}

TEST_CASE("under a bf16 policy K/V blocks travel as bf16: half the bytes, the same attention") {
  const int c = world_size();
  if (c == 1) return;
  Mesh mesh(MPI_COMM_WORLD, "context=" + std::to_string(c));
  const AxisGroup& axis = mesh.axis(kContextAxis);
  const PrecisionScope bf16({.compute = DType::kBF16, .matmul = Bf16Matmul::kRounded});
  const int N = 4, K = 2;
  const int64_t B = 2, T = 8 * c, H = 4, C = (N + 2 * K) * H;
  const Tensor qkv = random_tensor({B, T, C}, 71);
  const SequenceSplit split{.size = c, .load_balance = true};
  const std::vector<int64_t> mine = split.positions(axis.rank(), T / c);
  NoGradGuard no_grad;
  const Tensor y_ref = rows_at(ops::causal_attention(qkv, N, K), mine);
  for (const ContextComm comm : {ContextComm::kRing, ContextComm::kAllGather}) {
    CAPTURE(context_comm_name(comm));
    std::map<DType, int64_t> bytes;
    std::map<DType, Tensor> out;
    for (const DType wire : {DType::kF32, DType::kBF16}) {
      mesh.context().trace.clear();
      mesh.context().trace.set_recording(true);
      out[wire] = context_attention(axis, split, {.comm = comm, .kv_dtype = wire}, rows_at(qkv, mine), N, K);
      for (const CommRecord& e : mesh.context().trace.events()) bytes[wire] += e.bytes;
      mesh.context().trace.set_recording(false);
    }
    // The matmuls round K and V to bf16 whatever they travelled as: bit for bit the same.
    CHECK(max_difference(out[DType::kF32], out[DType::kBF16]) == 0.0);
    // Against one process: both multiply bf16 operands, but the online softmax rounds its
    // unnormalised block probabilities where one process rounds normalised ones (2^-8).
    CHECK(max_difference(out[DType::kBF16], y_ref) <= 1e-2);
    CHECK(bytes[DType::kBF16] * 2 == bytes[DType::kF32]);
  }
}

TEST_CASE("the gradient of attention through the ring equals finite differences") {
  const int c = world_size();
  if (c == 1) return;
  Mesh mesh(MPI_COMM_WORLD, "context=" + std::to_string(c));
  const AxisGroup& axis = mesh.axis(kContextAxis);
  const int N = 2, K = 1;
  const int64_t T = 4 * c, C = (N + 2 * K) * 2;
  const SequenceSplit split{.size = c, .load_balance = true};
  const std::vector<int64_t> mine = split.positions(axis.rank(), T / c);
  Tensor global = random_tensor({1, T, C}, 61);
  const Tensor r = random_tensor({1, T, N * 2}, 62);
  // L = sum over the whole sequence of y * r, each rank adding its positions.
  const auto loss = [&](const Tensor& local) {
    NoGradGuard no_grad;
    double sum = weighted_sum(context_attention(axis, split, {}, local, N, K), rows_at(r, mine));
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
  };
  Tensor local = rows_at(global, mine);
  local.set_requires_grad(true);
  run_backward(context_attention(axis, split, {}, local, N, K), rows_at(r, mine));
  std::vector<double> analytic(T * C, 0.0);  // the whole sequence's gradient, each rank its rows
  for (size_t i = 0; i < mine.size(); ++i) {
    for (int64_t j = 0; j < C; ++j) analytic[mine[i] * C + j] = local.grad().data()[i * C + j];
  }
  MPI_Allreduce(MPI_IN_PLACE, analytic.data(), static_cast<int>(analytic.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const float eps = 1e-2f;
  int bad = 0;
  for (int64_t e = 0; e < T * C; ++e) {
    const float saved = global.data()[e];
    global.data()[e] = saved + eps;
    const double up = loss(rows_at(global, mine));
    global.data()[e] = saved - eps;
    const double down = loss(rows_at(global, mine));
    global.data()[e] = saved;
    const double numeric = (up - down) / (2.0 * eps);
    if (std::abs(analytic[e] - numeric) > 2e-3 + 2e-2 * std::abs(numeric) && bad++ < 5) {
      FAIL_CHECK("position " << e / C << " column " << e % C << ": analytic " << analytic[e] << " numeric " << numeric);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("context parallelism trains exactly like the single process") {
  const int n = world_size();
  const ContextParallelConfig ring{.comm = ContextComm::kRing}, gather{.comm = ContextComm::kAllGather};
  const ContextParallelConfig contiguous{.comm = ContextComm::kRing, .load_balance = false};
  std::vector<Case> cases;
  if (n == 2) {
    cases = {{.spec = "context=2", .arch = nn::Arch::Gpt, .cp = ring},
             {.spec = "context=2", .arch = nn::Arch::Llama, .cp = ring},
             {.spec = "context=2", .arch = nn::Arch::Llama, .cp = gather},
             {.spec = "context=2", .arch = nn::Arch::Gpt, .cp = contiguous},
             {.spec = "context=2", .arch = nn::Arch::Gpt, .cp = gather, .accum = 2, .remat = nn::Remat::Full},
             {.spec = "context=2", .arch = nn::Arch::Llama, .cp = ring, .zero = 3, .accum = 2},
             {.spec = "context=2", .arch = nn::Arch::Llama, .cp = gather, .zero = 1},
             {.spec = "context=2", .cp = ring, .moe = "llama-moe-tiny"},
             {.spec = "context=2", .cp = gather, .accum = 2, .remat = nn::Remat::Full, .moe = "gpt-moe-tiny"}};
  } else if (n == 4) {
    cases = {{.spec = "context=4", .arch = nn::Arch::Llama, .cp = ring},
             {.spec = "context=4", .arch = nn::Arch::Gpt, .cp = gather, .accum = 2},
             {.spec = "context=4", .arch = nn::Arch::Llama, .cp = {.comm = ContextComm::kAllGather, .load_balance = false}},
             {.spec = "data=2,context=2", .arch = nn::Arch::Llama, .cp = ring, .zero = 3},
             {.spec = "fsdp=2,context=2", .arch = nn::Arch::Gpt, .cp = gather, .zero = 2},
             {.spec = "data=2,context=2", .arch = nn::Arch::Gpt, .cp = ring, .remat = nn::Remat::SaveMatmulOutputs},
             {.spec = "context=2,tensor=2", .arch = nn::Arch::Llama, .cp = ring, .tp = {.sequence_parallel = true}},
             {.spec = "context=2,tensor=2", .arch = nn::Arch::Gpt, .cp = gather, .zero = 1},
             {.spec = "pipe=2,context=2", .arch = nn::Arch::Llama, .cp = ring, .accum = 4},
             {.spec = "pipe=2,context=2", .arch = nn::Arch::Gpt, .cp = gather, .zero = 1, .accum = 2,
              .remat = nn::Remat::Full, .schedule = ScheduleKind::kZeroBubble},
             {.spec = "pipe=2,context=2", .arch = nn::Arch::Llama, .cp = ring, .accum = 4,
              .schedule = ScheduleKind::kInterleaved, .virtual_stages = 2, .layers = 4},
             {.spec = "expert=2,context=2", .cp = ring, .moe = "llama-moe-tiny"},
             {.spec = "expert=2,context=2", .cp = gather, .zero = 3, .moe = "gpt-moe-tiny"}};
  } else if (n == 8) {
    cases = {{.spec = "data=2,context=2,tensor=2", .arch = nn::Arch::Llama, .cp = ring, .zero = 3,
              .tp = {.sequence_parallel = true}},
             {.spec = "pipe=2,context=2,tensor=2", .arch = nn::Arch::Gpt, .cp = ring, .accum = 2,
              .tp = {.sequence_parallel = true}}};
  }
  for (const Case& k : cases) check_case(k);
}

TEST_CASE("a sequence the context axis cannot cut, and an MoE capacity, are clear errors before any collective") {
  const nn::ModelConfig c = nn::ModelConfig::preset("llama-tiny");
  const auto error = [&](const std::string& spec, int64_t seq_len, bool balance) {
    return user_error_of([&] {
      Layout::from_spec(spec).validate({.model = c, .seq_len = seq_len, .context_load_balance = balance});
    });
  };
  CHECK(error("context=2", 6, true).find("sequence length 6 does not split into the 4 chunks of context=2 with load "
                                          "balancing") != std::string::npos);
  CHECK(error("context=4", 6, false).find("choose a sequence length that is a multiple of 4") != std::string::npos);
  CHECK(user_error_of([&] {
          Layout::from_spec("context=2").validate({.model = nn::ModelConfig::preset("llama-moe-tiny"), .seq_len = 16});
        }).find("use --capacity-factor 0 (dropless) with a context axis") != std::string::npos);
  CHECK_NOTHROW(Layout::from_spec("context=2").validate({.model = c, .seq_len = 8}));
  CHECK(Layout::from_spec("context=4").num_ranks() == 4);
  CHECK(Layout::from_spec("data=2,context=2").data_ranks() == 2);
  const SequenceSplit split{.size = 2, .load_balance = true};
  CHECK(split.positions(0, 4) == std::vector<int64_t>{0, 1, 6, 7});
  CHECK(split.positions(1, 4) == std::vector<int64_t>{2, 3, 4, 5});
  CHECK(user_error_of([&] { split.slice({.rows = 1, .seq_len = 6, .inputs = std::vector<int32_t>(6), .targets = std::vector<int32_t>(6)}, 0); })
            .find("does not split into the 4 chunks") != std::string::npos);
}
