// Tensor parallelism against the single-process run: same seed, same global batch, the
// same loss and pre-clip gradient norm step by step on every rank, and every parameter
// shard equal to the same elements of the single process's parameters; for GPT and LLaMA
// (grouped-query attention, including fewer kv heads than tensor ranks), alone and with
// DP / ZeRO-1/2/3, remat and gradient accumulation. Also: the collectives per block, the
// vocab-parallel loss (unfused and fused with the head) and embedding against the
// unsharded ops, and the layout errors.
//
// Tolerance: as in test_data_parallel.cpp the layouts differ only in fp32 summation order
// (the row-parallel all_reduce sums partial products, the vocab-parallel loss sums its
// exponentials per slice); 1e-4 relative on losses and norms over 10 steps, 2e-4 absolute
// on parameters of size ~0.02-1.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "framework/autograd.h"
#include "framework/data/arithmetic.h"
#include "framework/data/dataset.h"
#include "framework/ops.h"
#include "framework/precision.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/diff_collectives.h"
#include "parallel/parallelize.h"
#include "parallel/tensor/tensor_parallel.h"
#include "parallel/tensor/vocab_parallel.h"
#include "parallel/train_step.h"
#include "tests/mpi_test_util.h"
#include "tests/parallel_run.h"
#include "tests/reference_run.h"

using namespace shardlab;
using namespace shardlab::parallel;
using namespace shardlab::testing;

namespace {

constexpr uint64_t kSeed = 11;

// 2 blocks of 4 heads, so that tensor=4 divides them; LLaMA keeps K = 2.
nn::ModelConfig model_config(nn::Arch arch, nn::Remat remat = nn::Remat::None) { return small_model(arch, remat, 2); }

Run reference(const nn::ModelConfig& c, int accum) { return shardlab::testing::reference(c, accum, kSeed); }

Run distributed(const Mesh& mesh, const nn::ModelConfig& c, int zero, int accum, const TensorParallelConfig& tp) {
  const auto model = nn::deferred_transformer(c);
  DataParallelConfig config;
  config.zero = zero;
  config.bucket_mb = 0.01;
  config.seed = kSeed;
  return train_standard_run(*model, parallelize(*model, mesh, {.data = config, .tensor = tp}), mesh, accum);
}

// This rank's shard of the single process's parameter `name` (the whole of it when replicated).
std::vector<float> shard_of(const std::map<std::string, TensorShard>& shards, const std::string& name,
                            const std::vector<float>& full) {
  const auto it = shards.find(name);
  if (it == shards.end()) return full;
  int64_t n = 1;
  for (int64_t d : it->second.local()) n *= d;
  std::vector<float> out(n);
  it->second.for_each_run([&](int64_t lo, int64_t go, int64_t count) {
    std::copy_n(full.begin() + go, count, out.begin() + lo);
  });
  return out;
}

void check_equal(const Mesh& mesh, const nn::ModelConfig& c, const Run& ref, const Run& got) {
  check_losses_and_norms(ref, got);
  const auto shards = tensor_shards(c, mesh.axis_size("tensor"), mesh.coord("tensor"));
  double worst = 0;
  for (const auto& [name, values] : ref.params) {
    const std::vector<float> expect = shard_of(shards, name, values);
    const std::vector<float>& mine = got.params.at(name);
    CHECK_MESSAGE(mine.size() == expect.size(), name << ": shard of " << mine.size() << " elements, expected "
                                                    << expect.size());
    if (mine.size() != expect.size()) continue;  // no REQUIRE: every rank must reach the collectives below
    for (size_t i = 0; i < expect.size(); ++i) worst = std::max(worst, double(std::abs(mine[i] - expect[i])));
  }
  CHECK_MESSAGE(worst <= 2e-4, "largest parameter difference " << worst);
  // Parameters every rank holds whole agree bit for bit with rank 0's copy.
  for (const auto& [name, values] : got.params) {
    if (shards.contains(name)) continue;
    std::vector<float> root = values;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK_MESSAGE(root == values, name << " differs from rank 0's copy");
  }
}

// The tensor-parallel layouts of this job, with the ZeRO stages each is run with.
std::vector<std::pair<std::string, std::vector<int>>> layouts() {
  const int n = world_size();
  if (n == 2) return {{"data=1,tensor=2", {0, 3}}};
  if (n == 4) return {{"data=1,tensor=4", {0}}, {"data=2,tensor=2", {0, 1, 2, 3}}, {"fsdp=2,tensor=2", {3}}};
  return {};
}

// Plain Megatron, sequence parallelism, and sequence parallelism with the collective matmul.
std::vector<TensorParallelConfig> tensor_variants() {
  return {{.sequence_parallel = false, .overlap = false},
          {.sequence_parallel = true, .overlap = false},
          {.sequence_parallel = true, .overlap = true}};
}

}  // namespace

TEST_CASE("tensor parallelism trains exactly like the single process") {
  for (nn::Arch arch : {nn::Arch::Gpt, nn::Arch::Llama}) {
    for (auto [remat, accum] : {std::pair{nn::Remat::None, 1}, std::pair{nn::Remat::Full, 2},
                                std::pair{nn::Remat::SaveMatmulOutputs, 1}}) {
      const nn::ModelConfig c = model_config(arch, remat);
      const Run ref = reference(c, accum);
      for (const auto& [spec, stages] : layouts()) {
        Mesh mesh(MPI_COMM_WORLD, spec);
        mesh.context().watchdog.set_timeout(15);
        for (int zero : stages) {
          for (const TensorParallelConfig tp : tensor_variants()) {
            CAPTURE(spec);
            CAPTURE(zero);
            CAPTURE(accum);
            CAPTURE(nn::arch_name(arch));
            CAPTURE(nn::remat_name(remat));
            CAPTURE(tp.sequence_parallel);
            CAPTURE(tp.overlap);
            check_equal(mesh, c, ref, distributed(mesh, c, zero, accum, tp));
          }
        }
      }
    }
  }
}

TEST_CASE("the fused vocab-parallel head equals the unfused vocab-parallel loss and the single process") {
  const int n = world_size();
  Mesh mesh(MPI_COMM_WORLD, "data=1,tensor=" + std::to_string(n));
  const AxisGroup& tp = mesh.axis("tensor");
  const int64_t R = 12, V = 8 * n, D = 5, Vl = V / n, first = tp.rank() * Vl;
  std::vector<float> xs(R * D), ws(V * D);
  for (int64_t i = 0; i < R * D; ++i) xs[i] = std::sin(0.37f * static_cast<float>(i));
  for (int64_t i = 0; i < V * D; ++i) ws[i] = std::cos(0.23f * static_cast<float>(i)) * 1.5f;
  std::vector<int32_t> targets(R);
  for (int64_t r = 0; r < R; ++r) targets[r] = r % 5 == 4 ? -1 : static_cast<int32_t>((r * 7) % V);
  const std::vector<float> mine_w(ws.begin() + first * D, ws.begin() + (first + Vl) * D);
  // The single process, unfused; the vocab-parallel loss unfused; the fused one in chunks
  // of 3 rows forward and 4 of this rank's vocabulary columns backward.
  Tensor x = Tensor::from({R, D}, xs).set_requires_grad(true), w = Tensor::from({V, D}, ws).set_requires_grad(true);
  Tensor ref = ops::cross_entropy(ops::linear(x, w), targets, 20.0);
  ref.backward();
  Tensor xu = Tensor::from({R, D}, xs).set_requires_grad(true), wu = Tensor::from({Vl, D}, mine_w).set_requires_grad(true);
  Tensor unfused = vocab_parallel_cross_entropy(tp, ops::linear(xu, wu), targets, first, 20.0);
  unfused.backward();
  Tensor xf = Tensor::from({R, D}, xs).set_requires_grad(true), wf = Tensor::from({Vl, D}, mine_w).set_requires_grad(true);
  Tensor fused = vocab_parallel_linear_cross_entropy(tp, xf, wf, targets, first, V, 20.0, 3 * Vl * 4);
  fused.backward();
  CHECK(fused.item() == doctest::Approx(ref.item()).epsilon(1e-6));
  CHECK(fused.item() == doctest::Approx(unfused.item()).epsilon(1e-6));
  // Every rank the same loss, bit for bit.
  float root = fused.item();
  MPI_Bcast(&root, 1, MPI_FLOAT, 0, MPI_COMM_WORLD);
  CHECK(root == fused.item());
  // x's gradient: each rank's partial, summed over the axis (what f's backward does).
  std::vector<float> gx(xf.grad().span().begin(), xf.grad().span().end()), gxu(xu.grad().span().begin(), xu.grad().span().end());
  all_reduce(tp, gx);
  all_reduce(tp, gxu);
  double worst = 0;
  for (int64_t i = 0; i < R * D; ++i) {
    worst = std::max(worst, double(std::abs(gx[i] - x.grad().data()[i])));
    worst = std::max(worst, double(std::abs(gx[i] - gxu[i])));
  }
  for (int64_t i = 0; i < Vl * D; ++i) {
    worst = std::max(worst, double(std::abs(wf.grad().data()[i] - w.grad().data()[first * D + i])));
    worst = std::max(worst, double(std::abs(wf.grad().data()[i] - wu.grad().data()[i])));
  }
  CHECK(worst <= 1e-6);
}

TEST_CASE("tensor parallelism with the fused head trains like the single process without it") {
  for (nn::Arch arch : {nn::Arch::Gpt, nn::Arch::Llama}) {
    nn::ModelConfig c = model_config(arch);
    const Run ref = reference(c, 1);
    c.fused_head = nn::FusedHead::On;
    for (const auto& [spec, stages] : layouts()) {
      Mesh mesh(MPI_COMM_WORLD, spec);
      mesh.context().watchdog.set_timeout(15);
      for (const TensorParallelConfig tp : tensor_variants()) {
        CAPTURE(spec);
        CAPTURE(nn::arch_name(arch));
        CAPTURE(tp.sequence_parallel);
        CAPTURE(tp.overlap);
        check_equal(mesh, c, ref, distributed(mesh, c, stages.back(), 1, tp));
      }
    }
  }
}

TEST_CASE("per block: two all_reduces of B*T*D values each way; with sequence parallelism two all_gathers and two "
          "reduce_scatters; in bf16 (--activation-dtype) each of them half the fp32 bytes") {
  const int n = world_size();
  if (n == 1) return;
  Mesh mesh(MPI_COMM_WORLD, "data=1,tensor=" + std::to_string(n));
  for (nn::Arch arch : {nn::Arch::Gpt, nn::Arch::Llama}) {
    for (auto [sequence_parallel, wire] : {std::pair{false, DType::kF32}, std::pair{true, DType::kF32},
                                           std::pair{false, DType::kBF16}, std::pair{true, DType::kBF16}}) {
      const nn::ModelConfig c = model_config(arch);
      if (c.n_heads % n != 0) continue;
      nn::Transformer model(c);
      nn::initialize(model, kSeed);
      DataParallelConfig config;
      config.seed = kSeed;
      ParallelConfig parallel{.data = config, .tensor = {.sequence_parallel = sequence_parallel}};
      parallel.precision.activation = wire;
      auto strategy = parallelize(model, mesh, parallel);
      data::BatchLoader loader(arithmetic_dataset(), kBatch, kSeq);
      const data::Batch b = loader.next();
      mesh.context().trace.clear();
      mesh.context().trace.set_recording(true);
      strategy.begin_microbatch();
      model.loss(b.inputs, b.targets, b.rows, b.seq_len).backward();
      mesh.context().trace.set_recording(false);
      // The trace counts an all_gather's output and a reduce_scatter's input: the full
      // B*T*D values, of which each rank sends or keeps B*T*D/t; 4 bytes each, or 2 in bf16.
      // The loss's statistics and the parameter gradients stay fp32.
      const int64_t activation_bytes = kBatch * kSeq * c.d_model * dtype_bytes(wire), L = c.n_layers;
      std::map<CollectiveOp, int> activations, other;
      for (const CommRecord& r : mesh.context().trace.events()) {
        REQUIRE(r.group == "tensor");
        (r.bytes == activation_bytes ? activations : other)[r.op]++;
      }
      CAPTURE(nn::arch_name(arch));
      CAPTURE(sequence_parallel);
      CAPTURE(std::string(dtype_name(wire)));
      if (!sequence_parallel) {
        // 2 per block each way, plus the embedding's g forward and the head's f backward.
        CHECK(activations[CollectiveOp::kAllReduce] == 4 * L + 2);
        CHECK(activations.size() == 1);
      } else {
        // Per block 2 of each forward and 2 backward (each other's backward); the embedding
        // reduce-scatters and the head gathers, forward, and the reverse backward.
        CHECK(activations[CollectiveOp::kAllGather] == 4 * L + 2);
        CHECK(activations[CollectiveOp::kReduceScatter] == 4 * L + 2);
        CHECK(activations[CollectiveOp::kAllReduce] == 0);
      }
      // The loss: one all_gather of row maxima and one all_reduce of sums and target logits;
      // with kv heads shared by ranks, one all_reduce of their weight gradients per block;
      // with sequence parallelism the gradients of the norms (weight, and GPT's bias), of
      // the row-parallel biases and of the positions (GPT), summed.
      const int64_t norms = 2 * L + 1, per_norm = arch == nn::Arch::Gpt ? 2 : 1;
      const int64_t partial = !sequence_parallel ? 0 : norms * per_norm + (arch == nn::Arch::Gpt ? 2 * L + 1 : 0);
      CHECK(other[CollectiveOp::kAllGather] == 1);
      CHECK(other[CollectiveOp::kAllReduce] == 1 + (c.n_kv_heads < n ? L : 0) + partial);
    }
  }
}

// Decoding on the tensor axis (generate --mesh tensor=N): each block's two row-parallel
// outputs are all_reduced, and under bf16 they travel as bf16 partial sums (summed in
// fp32), half of fp32's bytes, as in training.
TEST_CASE("a decode step's tensor-axis all_reduces carry the precision's activation dtype") {
  const int n = world_size();
  if (n == 1) return;
  Mesh mesh(MPI_COMM_WORLD, "tensor=" + std::to_string(n));
  const nn::ModelConfig c = model_config(nn::Arch::Gpt);
  if (c.n_heads % n != 0) return;
  std::map<DType, int64_t> bytes;
  std::map<DType, std::vector<float>> logits;
  for (const DType wire : {DType::kF32, DType::kBF16}) {
    const auto model = nn::deferred_transformer(c);
    ParallelConfig config;
    config.data.seed = kSeed;
    config.precision.activation = wire;
    parallelize_for_inference(*model, mesh, config);
    const NoGradGuard no_grad;
    const int64_t B = 2;
    nn::KVCache cache(c, B, model->blocks.front()->attn.n_kv_heads);
    const std::vector<int32_t> prompt{1, 2, 3, 4, 5, 6};
    model->decode(prompt, B, 3, cache);  // prefill 3 positions
    mesh.context().trace.clear();
    mesh.context().trace.set_recording(true);
    const Tensor next = model->decode(std::vector<int32_t>{7, 8}, B, 1, cache);  // one token per row
    mesh.context().trace.set_recording(false);
    for (const CommRecord& r : mesh.context().trace.events()) {
      if (r.op == CollectiveOp::kAllReduce) bytes[wire] += r.bytes;
    }
    logits[wire].assign(next.data(), next.data() + next.numel());
  }
  // Two all_reduces per block of B rows x D, plus the embedding's.
  CHECK(bytes[DType::kF32] >= 2 * c.n_layers * 2 * c.d_model * 4);
  CHECK(bytes[DType::kBF16] * 2 == bytes[DType::kF32]);
  // fp32 compute here: the sums differ from fp32's only by the partial sums' rounding to bf16.
  REQUIRE(logits[DType::kBF16].size() == logits[DType::kF32].size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < logits[DType::kF32].size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(logits[DType::kBF16][i] - logits[DType::kF32][i])));
    scale = std::max(scale, static_cast<double>(std::abs(logits[DType::kF32][i])));
  }
  CHECK(worst > 0);              // bf16 really travelled
  CHECK(worst <= 0.05 * scale);  // a few roundings of 2^-9 relative through the blocks
}

TEST_CASE("the step plan lists, group by group, the collectives a tensor-parallel step issues") {
  for (const auto& [spec, stages] : layouts()) {
    Mesh mesh(MPI_COMM_WORLD, spec);
    for (nn::Arch arch : {nn::Arch::Gpt, nn::Arch::Llama}) {
      for (nn::Remat remat : {nn::Remat::None, nn::Remat::Full}) {
        for (int zero : stages) {
          for (auto [microbatches, tp] : {std::pair{1, tensor_variants()[0]}, std::pair{2, tensor_variants()[0]},
                                          std::pair{1, tensor_variants()[1]}, std::pair{2, tensor_variants()[1]},
                                          std::pair{1, tensor_variants()[2]}, std::pair{2, tensor_variants()[2]}}) {
            CAPTURE(tp.sequence_parallel);
            CAPTURE(tp.overlap);
            CAPTURE(spec);
            CAPTURE(nn::arch_name(arch));
            CAPTURE(nn::remat_name(remat));
            CAPTURE(zero);
            CAPTURE(microbatches);
            nn::ModelConfig c = model_config(arch, remat);
            // The fused head's loss communicates differently: half the cases run it.
            c.fused_head = remat == nn::Remat::Full ? nn::FusedHead::On : nn::FusedHead::Off;
            CAPTURE(nn::fused_head_name(c.fused_head));
            const auto model = nn::deferred_transformer(c);
            DataParallelConfig config;
            config.zero = zero;
            config.bucket_mb = 0.01;
            config.seed = kSeed;
            // Half the cases send the stream's activations in bf16 (--activation-dtype bf16).
            const DType wire = microbatches == 2 ? DType::kBF16 : DType::kF32;
            CAPTURE(std::string(dtype_name(wire)));
            ParallelConfig parallel{.data = config, .tensor = tp};
            parallel.precision.activation = wire;
            const StepPlan plan =
                plan_step(*model, mesh, parallel, {.batch = kBatch, .seq_len = kSeq, .microbatches = microbatches});
            auto strategy = parallelize(*model, mesh, parallel);
            auto optimizer = standard_optimizer(strategy);
            const DataAxes axes = DataAxes::of(mesh);
            data::BatchLoader loader(arithmetic_dataset(), kBatch, kSeq, axes.batch->rank(), axes.batch->size());
            mesh.context().trace.clear();
            mesh.context().trace.set_recording(true);
            train_step(*model, strategy, *optimizer, loader.next(), microbatches, kLr, 1.0);
            mesh.context().trace.set_recording(false);
            std::map<std::string, std::vector<PlannedCollective>> planned;
            std::map<std::string, std::vector<CommRecord>> ran;
            for (const PlannedCollective& p : plan) planned[p.group].push_back(p);
            std::vector<CommRecord> events = mesh.context().trace.events();  // in completion order
            std::stable_sort(events.begin(), events.end(), [](const CommRecord& a, const CommRecord& b) {
              return a.start < b.start;  // in issue order
            });
            for (const CommRecord& r : events) ran[r.group].push_back(r);
            for (const auto& [group, records] : ran) {
              CAPTURE(group);
              const std::vector<PlannedCollective>& expect = planned[group];
              CHECK(records.size() == expect.size());
              for (size_t i = 0; i < std::min(records.size(), expect.size()); ++i) {
                CHECK_MESSAGE((records[i].op == expect[i].op && records[i].bytes == expect[i].bytes),
                              "entry " << i << ": ran " << to_string(records[i].op) << " of " << records[i].bytes
                                       << " B, planned " << to_string(expect[i].op) << " of " << expect[i].bytes
                                       << " B (" << expect[i].what << ")");
                if (records[i].op != expect[i].op || records[i].bytes != expect[i].bytes) break;
              }
            }
            CHECK(planned.size() == ran.size());
          }
        }
      }
    }
  }
}

TEST_CASE("the vocab-parallel loss and embedding equal the unsharded ones") {
  const int n = world_size();
  Mesh mesh(MPI_COMM_WORLD, "data=1,tensor=" + std::to_string(n));
  const AxisGroup& tp = mesh.axis("tensor");
  const int64_t R = 12, V = 8 * n, D = 5, Vl = V / n, first = tp.rank() * Vl;
  // Same values on every rank; targets in every rank's slice, and ignored ones.
  std::vector<float> values(R * V);
  for (int64_t i = 0; i < R * V; ++i) values[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  std::vector<int32_t> targets(R);
  for (int64_t r = 0; r < R; ++r) targets[r] = r % 5 == 4 ? -1 : static_cast<int32_t>((r * 7) % V);

  Tensor full = Tensor::from({R, V}, values).set_requires_grad(true);
  Tensor ref = ops::cross_entropy(full, targets);
  ref.backward();
  std::vector<float> mine(R * Vl);
  for (int64_t r = 0; r < R; ++r) std::copy_n(values.begin() + r * V + first, Vl, mine.begin() + r * Vl);
  Tensor local = Tensor::from({R, Vl}, mine).set_requires_grad(true);
  Tensor loss = vocab_parallel_cross_entropy(tp, local, targets, first);
  loss.backward();
  CHECK(loss.item() == doctest::Approx(ref.item()).epsilon(1e-6));
  double worst = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < Vl; ++j)
      worst = std::max(worst, double(std::abs(local.grad().data()[r * Vl + j] - full.grad().data()[r * V + first + j])));
  CHECK(worst <= 1e-7);
  // gather_vocab rebuilds the full rows.
  CHECK(gather_vocab(tp, local.detach()).span().size() == values.size());
  const Tensor gathered = gather_vocab(tp, local.detach());
  CHECK(std::equal(values.begin(), values.end(), gathered.data()));

  // Embedding: ids in every slice; the vocab-parallel lookup summed over ranks.
  std::vector<float> table(V * D);
  for (int64_t i = 0; i < V * D; ++i) table[i] = std::cos(0.11f * static_cast<float>(i));
  std::vector<int32_t> ids(R);
  for (int64_t r = 0; r < R; ++r) ids[r] = static_cast<int32_t>((r * 5 + 3) % V);
  Tensor w = Tensor::from({V, D}, table).set_requires_grad(true);
  Tensor y = ops::embedding(w, ids, 1, R);
  ops::sum(ops::mul(y, y)).backward();
  Tensor wl = Tensor::from({Vl, D}, std::vector<float>(table.begin() + first * D, table.begin() + (first + Vl) * D))
                  .set_requires_grad(true);
  Tensor yl = reduce_from_group(tp, ops::embedding(wl, ids, 1, R, first, V));
  ops::sum(ops::mul(yl, yl)).backward();
  CHECK(std::equal(y.span().begin(), y.span().end(), yl.span().begin()));
  CHECK(std::equal(wl.grad().span().begin(), wl.grad().span().end(), w.grad().data() + first * D));
}
