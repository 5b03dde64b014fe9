// The book's worked figures behind shardlab-plan's totals, roofline and point-to-point
// calculators, as tables (tests/book_figure.h). (tests/test_cost_model.cpp holds the rest
// of the book's figures, one test case per figure; tests/test_cost_serving.cpp the
// serving chapters'.)
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "framework/error.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/hardware/host_offload.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/roofline/ops.h"
#include "parallel/cost/sharding/matmul_cases.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/run_totals.h"
#include "parallel/cost/training/train_step.h"
#include "tests/book_figure.h"

using namespace shardlab::cost;
using shardlab::test::check;
using shardlab::test::kBook;
using shardlab::test::kExact;

namespace {

constexpr double kYear = 365 * kSecondsPerDay;

RunTotals llama3_70b(int64_t chips, double mfu, double activation_bytes = 0) {
  const RunSpec run{.params = 70e9, .tokens = 15e12, .chips = chips, .mfu = mfu, .activation_bytes = activation_bytes};
  return run_totals(run, hardware("tpu-v5p"));
}

}  // namespace

TEST_CASE("training totals: 6PT FLOPs, cluster FLOP/s, days at an MFU (chapters 5-6)") {
  const RunTotals one = llama3_70b(1, 1.0);
  const RunTotals pod = llama3_70b(8960, 0.4);
  const RunTotals two_pods = llama3_70b(18823, 0.5);
  const RunTotals ten_pods = llama3_70b(89600, 0.5);
  const double matmul_params = count_params(model_preset("llama3-70b")).matmul;
  check({
      {"applied-training.md, Counting parameters and FLOPs", "FLOPs per token, 6 x 70e9", one.flops_per_token, 4.2e11,
       kExact},
      {"applied-training.md, Counting parameters and FLOPs", "6N of the llama3-70b preset's matmul parameters",
       6 * matmul_params, 4.2e11, kBook},
      {"applied-training.md, Counting parameters and FLOPs", "seconds per token on one v5p (~1 ms)",
       one.flops_per_token / one.chip_flops_per_second, 1e-3, kBook},
      {"applied-training.md, Counting parameters and FLOPs", "FLOPs of 15T tokens", one.train_flops, 6.3e24, kExact},
      {"applied-training.md, Counting parameters and FLOPs", "years on one v5p at peak", one.seconds / kYear, 435,
       kBook},
      {"applied-training.md, Counting parameters and FLOPs", "seconds on a 8960-chip v5p pod at 40% MFU", pod.seconds,
       3.8e6, kBook},
      {"applied-training.md, Counting parameters and FLOPs", "days on that pod", pod.days, 44, kBook},
      {"training.md, Data Parallelism (FSDP)", "days on 18,823 v5p at 50% MFU", two_pods.days, 17, kBook},
      // The book's "about 2 days" on 10 pods holds only at peak FLOP/s (1.77 days); at the
      // 50% MFU of its own 17-day figure the same run takes 3.55 days.
      {"training.md, Scaling Between Pods", "days on 89,600 v5p at 50% MFU (book: 'about 2')", ten_pods.days, 3.55,
       0.01},
      {"training.md, Scaling Between Pods", "days on 89,600 v5p at peak", llama3_70b(89600, 1.0).days, 1.77, 0.01},
      // tpus.md multiplies by 4.5e14; the profile's 4.59e14 gives 4.11e18 (within 3%).
      {"tpus.md, Worked Problems Q2", "v5p pod FLOP/s, 8960 chips", pod.cluster_flops_per_second, 4e18, kBook},
      {"tpus.md, Worked Problems Q2", "v5p pod HBM, 8960 x 96 GB", pod.cluster_hbm_bytes, 860e12, kExact},
      {"tpus.md, Worked Problems Q2", "v5e pod FLOP/s, 256 chips",
       run_totals({.params = 1, .tokens = 1, .chips = 256}, hardware("tpu-v5e")).cluster_flops_per_second, 5.1e16,
       kBook},
      {"tpus.md, Worked Problems Q2", "v5e pod HBM, 256 x 16 GB",
       run_totals({.params = 1, .tokens = 1, .chips = 256}, hardware("tpu-v5e")).cluster_hbm_bytes, 4e12, kBook},
      {"training.md, Worked Problems Q3", "HBM of a v5p 16x16x16 slice",
       llama3_70b(4096, 1.0).cluster_hbm_bytes, 393e12, kExact},
  });
}

TEST_CASE("chip, pod and node facts: hosts, cores, vector ALUs, prices (chapters 2, 8, 12)") {
  const PodTotals v5e = pod_totals(hardware("tpu-v5e")), v5p = pod_totals(hardware("tpu-v5p"));
  const HardwareProfile& h100 = hardware("h100");
  const char* q2 = "tpus.md, Worked Problems Q2";
  const char* quiz1 = "gpus.md, Quiz 1";
  const char* price = "applied-inference.md, FLOPs / $ (bf16 FLOP/s per USD/hour)";
  check({
      {q2, "v5e pod: 16 x 16 / 8 hosts", static_cast<double>(v5e.hosts), 32, 1e-12},
      {q2, "v5e pod: TensorCores", static_cast<double>(v5e.cores), 256, 1e-12},
      {q2, "v5e pod FLOP/s, 256 x 2e14", v5e.flops_bf16, 5.1e16, kBook},
      {q2, "v5e pod HBM, 256 x 16 GB", v5e.hbm_bytes, 4e12, kBook},
      {q2, "v5p pod: 16 x 20 x 28 / 4 hosts", static_cast<double>(v5p.hosts), 2240, 1e-12},
      {q2, "v5p pod: 8960 x 2 TensorCores", static_cast<double>(v5p.cores), 17920, 1e-12},
      {q2, "v5p pod FLOP/s (book multiplies by 4.5e14)", v5p.flops_bf16, 4e18, kBook},
      {q2, "v5p pod HBM, 8960 x 96 GB", v5p.hbm_bytes, 860e12, kExact},
      {quiz1, "Q1: H100 CUDA cores, 132 x 4 x 32", static_cast<double>(vector_alus(h100)), 16896, 1e-12},
      {quiz1, "Q1: B200 CUDA cores", static_cast<double>(vector_alus(hardware("b200"))), 18944, 1e-12},
      {quiz1, "Q1: v5p VPU ALUs, 2 x 4 x 8 x 128", static_cast<double>(vector_alus(hardware("tpu-v5p"))), 8192,
       1e-12},
      {quiz1, "Q2: H100 vector fp32 FLOP/s at 1.59 GHz", vector_alus(h100) * h100.facts.base_clock_hz, 26.9e12,
       0.01},
      {quiz1, "Q2: ... at the 1.98 GHz boost", vector_alus(h100) * h100.facts.clock_hz, 33.5e12, 0.01},
      // roofline --flop-count: a bare FLOP count's time at the matmul units' bf16 peak.
      {"roofline.md, Roofline timing (book_tour chapter 1)", "1e12 FLOPs on an H100, 1e12 / 9.89e14 s",
       1e12 / peak_flops(h100, DType::kBf16), 1.01e-3, 0.01},
      {quiz1, "Q5: H100 SMEM, 132 x 256 kB (~33 MB)", h100.facts.cores * h100.facts.smem_bytes_per_core, 33e6,
       kBook},
      {quiz1, "Q5: H100 register memory, 132 x 256 kB (~33 MB)", h100.facts.cores * h100.facts.register_bytes_per_core,
       33e6, kBook},
      {quiz1, "Q5: SMEM and registers together, 'about 66MB'",
       h100.facts.cores * (h100.facts.smem_bytes_per_core + h100.facts.register_bytes_per_core), 66e6, kBook},
      {price, "H100, 9.9e14 / $10.8", pod_totals(h100).flops_per_dollar_hour, 9.1e13, 0.01},
      {price, "v5p, 4.59e14 / $4.2", v5p.flops_per_dollar_hour, 1.09e14, 0.01},
      {price, "v5e, 1.97e14 / $1.2", v5e.flops_per_dollar_hour, 1.64e14, 0.01},
      // The current text's FLOPs / $ column: FLOP/s x 3600 s / USD per hour.
      {price, "H100: 3.3e17 FLOPs per dollar", pod_totals(h100).flops_per_dollar, 3.3e17, kBook},
      {price, "v5p: 3.9e17", v5p.flops_per_dollar, 3.9e17, kBook},
      {price, "v5e: 5.8e17 (1.97e14 x 3600 / 1.2 = 5.91e17)", v5e.flops_per_dollar, 5.8e17, kBook},
  });
  CHECK(hardware("tpu-v6e").facts.mxu_size == 256);  // tpus.md: 256x256 on v6e, 128x128 before
  CHECK(pod_totals(hardware("b200")).price_per_hour == 0);  // the book gives no B200 price
}

TEST_CASE("training memory: state bytes per parameter, minimum chips, largest pure-DP model (chapters 5-6)") {
  const StateBytes book = state_preset("bf16-adam");
  CHECK(book.per_param() == 10);
  CHECK(state_preset("mixed-adam").per_param() == 16);
  // applied-training.md asks for 4 checkpoints per layer; its answer writes "3 times per
  // layer" and "2 * 8192 * 4e6 * 3 * 80" but prints 20.9 TB, which is the product with 4
  // (with 3 it would be 15.7 TB). The row asserts the 4-checkpoint product.
  const double checkpoints = checkpoint_bytes(4e6, 80, 8192, 4, DType::kBf16);
  const RunTotals pod = llama3_70b(8960, 0.4, checkpoints);
  // Its "44 days * 8960 / 171 = 1752 days" divides by 171 where it means 225 (the chips
  // just computed); 1752 is 44 x 8960 / 225. At 40% MFU on 225 chips: 1765 days.
  const RunTotals minimum = llama3_70b(225, 0.4, checkpoints);
  const HardwareProfile& v5p = hardware("tpu-v5p");
  check({
      {"applied-training.md, Counting parameters and FLOPs", "bf16 params + fp32 Adam, 10 x 70e9 B", pod.state_bytes,
       140e9 + 560e9, kExact},
      {"applied-training.md, Counting parameters and FLOPs", "4 bf16 [B, D] checkpoints per layer, B = 4e6",
       checkpoints, 20.9e12, 0.01},
      {"applied-training.md, Counting parameters and FLOPs", "total memory", pod.total_bytes, 21.6e12, 0.01},
      // 21.67e12 / 96e9 = 225.7: the book's 225 rounds down; 226 chips hold it.
      {"applied-training.md, Counting parameters and FLOPs", "minimum v5p chips",
       static_cast<double>(pod.min_chips), 226, 1e-12},
      {"applied-training.md, Counting parameters and FLOPs", "days on those chips at 40% MFU", minimum.days, 1752,
       0.01},
      {"applied-training.md, Counting parameters and FLOPs", "bytes per chip over 8960 v5p", pod.bytes_per_chip, 2.4e9,
       kBook},
      // The book's "about 9B parameters" rounds 96e9 / 10 = 9.6e9 down.
      {"training.md, Data Parallelism", "largest model pure DP trains on one v5p (HBM / 10)",
       largest_pure_dp_params(v5p, book), 9.6e9, kExact},
      {"training.md, Data Parallelism", "... 'about 9B'", largest_pure_dp_params(v5p, book), 9e9, kBook},
      // LLaMA-2 13B, 3M tokens, checkpoints after the 3 big matmuls: D + 2F = 6.4 D per layer.
      {"training.md, Worked Problems Q3", "LLaMA-2 13B checkpoints of a 3M batch",
       checkpoint_bytes(3e6, 40, 5120, 1 + 2 * 13824 / 5120.0, DType::kBf16), 7.86e12, kExact},
      // The same k from the framework's policy that keeps the layer input and the MLP's
      // two input matmuls (what `totals --remat save-mlp-matmul` prints as 6.4 x D).
      {"training.md, Worked Problems Q3", "... k from remat save-mlp-matmul",
       saved_activations_per_token_layer(model_preset("llama2-13b"), shardlab::nn::Remat::SaveMlpMatmulOutputs) / 5120,
       6.4, kExact},
  });
  CHECK_FALSE(llama3_70b(225, 0.4, checkpoints).fits);  // 225 x 96 GB < 21.67 TB
  CHECK(llama3_70b(226, 0.4, checkpoints).fits);
}

TEST_CASE("the context where attention's FLOPs equal the matmuls' (transformers.md)") {
  // The book's shape: F = 4D, N H = D, multi-head attention.
  TransformerShape s;
  s.layers = 64, s.d_model = 8192, s.d_ff = 4 * 8192, s.heads = 64, s.kv_heads = 64, s.head_dim = 128, s.vocab = 32000;
  s.context = 8192;
  TransformerShape q1 = s;  // Question 1's model: D = 4096, F = 16384, 32 heads
  q1.d_model = 4096, q1.d_ff = 16384, q1.heads = q1.kv_heads = 32;
  const char* fraction = "transformers.md, Fractional cost of attention with context length";
  check({
      {fraction, "attention = matmuls once T > 8D: 'for D ~ 8k, ... ~64K tokens'", attention_matmul_crossover_context(s),
       65536, kExact},
      {fraction, "Question 1's model: 8D = 32k", attention_matmul_crossover_context(q1), 32768, kExact},
      {"transformers.md, Question 5", "attention = the Q/K/V/O projections at T = 2D", attention_crossover_context(q1),
       8192, kExact},
  });
  // Grouped-query attention shrinks the projections, not the dot products: the crossover falls.
  TransformerShape gqa = s;
  gqa.kv_heads = 8;
  CHECK(attention_matmul_crossover_context(gqa) < attention_matmul_crossover_context(s));
  CHECK(attention_matmul_crossover_context(model_preset("llama3-70b")) ==
        doctest::Approx((count_params(model_preset("llama3-70b")).matmul - 128256.0 * 8192) / 80 / (2 * 64 * 128)));
}

TEST_CASE("rooflines of an einsum, an elementwise op and attention (chapters 1, 2, 4, 7)") {
  const HardwareProfile& v5e = hardware("tpu-v5e");
  const DType bf16 = DType::kBf16, int8 = DType::kInt8;
  const double n = 1 << 20;
  const Roofline dot = einsum_roofline("n,n->", {{'n', 1 << 20}}, {bf16}, v5e);
  const auto intensity = [&](const char* spec, std::map<char, int64_t> dims, std::vector<DType> dtypes) {
    return einsum_roofline(spec, dims, dtypes, v5e).intensity;
  };
  const AttentionShape mha{.q_len = 8192, .kv_len = 8192, .heads = 32, .kv_heads = 32, .head_dim = 128};
  AttentionShape decode = mha;
  decode.q_len = 1;
  const AttentionShape gqa{.q_len = 8192, .kv_len = 8192, .heads = 64, .kv_heads = 8, .head_dim = 128};
  HardwareProfile v6e_over_pcie = hardware("tpu-v6e");
  v6e_over_pcie.hbm_bandwidth = 1.5e10;  // the book's PCIe figure in place of HBM
  HardwareProfile v5e_vmem = v5e;
  v5e_vmem.hbm_bandwidth *= 22;  // VMEM: ~22x HBM bandwidth
  const MatmulSpec q4{.b = 1, .d = 4096, .f = 16384, .x = int8, .w = int8, .out = int8};
  check({
      // The book counts N + N - 1 FLOPs; an einsum counts 2N.
      {"roofline.md, Where Does the Time Go (dot product)", "FLOPs / bytes = 2N / (4N + 2)", dot.intensity,
       2 * n / (4 * n + 2), kExact},
      {"roofline.md, Where Does the Time Go (dot product)", "dot product intensity -> 1/2", dot.intensity, 0.5, kExact},
      {"roofline.md, Matrix multiplication", "bf16 matmul intensity BDF / (BD + DF + BF)",
       intensity("bd,df->bf", {{'b', 512}, {'d', 8192}, {'f', 32768}}, {bf16}),
       512.0 * 8192 * 32768 / (512.0 * 8192 + 8192.0 * 32768 + 512.0 * 32768), kExact},
      {"roofline.md, Matrix multiplication", "v5e critical intensity (book: 8.2e11 B/s; profile 8.1e11)",
       dot.critical_intensity, 240, 0.02},
      {"roofline.md, Q1 int8 matmul", "int8 critical intensity 3.94e14 / 8.1e11",
       einsum_roofline("bd,df->bf", {{'b', 256}, {'d', 65536}, {'f', 65536}}, {int8}, v5e).critical_intensity, 486,
       kExact},
      {"roofline.md, Q1 int8 matmul", "int8 intensity ~ 2B (B = 256 << D, F)",
       intensity("bd,df->bf", {{'b', 256}, {'d', 65536}, {'f', 65536}}, {int8}), 2 * 256, 0.01},
      {"roofline.md, Q2 int8 + bf16 matmul", "bf16 x int8 -> bf16 intensity ~ 2B (so B > 120)",
       intensity("bd,df->bf", {{'b', 128}, {'d', 65536}, {'f', 65536}}, {bf16, int8, bf16}), 2 * 128, 0.01},
      {"roofline.md, Q4 per-example weights", "int8[B,D] x int8[B,D,F] -> int8[B,F] intensity ~ 2",
       intensity("bd,bdf->bf", {{'b', 512}, {'d', 8192}, {'f', 8192}}, {int8}), 2, kExact},
      {"roofline.md, Problem 5", "H100 critical batch (book 1e15 / 3.35e12 = 298)",
       critical_intensity(hardware("h100"), bf16), 298, 0.01},
      // tpus.md works from rounded 1.3e8 B and 2e4 B and gets 271; the exact products give 263.
      {"tpus.md, Worked Problems Q4", "int8[B,4096] x int8[4096,16384] on v5e turns compute-bound at B",
       matmul_critical_batch(q4, v5e), 271, 0.04},
      {"tpus.md, Worked Problems Q4", "... from VMEM (22x HBM bandwidth)", matmul_critical_batch(q4, v5e_vmem), 11,
       0.02},
      {"tpus.md, Worked Problems Q3", "v6e matmul over PCIe (1.5e10 B/s): critical intensity, B > 61,000",
       critical_intensity(v6e_over_pcie, bf16), 61000, 0.01},
      {"inference.md, attention arithmetic intensity", "MHA prefill intensity T / 2",
       attention_roofline(mha, v5e).roofline.intensity, 8192 / 2, kExact},
      {"inference.md, attention arithmetic intensity", "MHA decode intensity S T / (S + T) ~ 1",
       attention_roofline(decode, v5e).roofline.intensity, 1, kExact},
      // transformers.md Q4 says prefill attention is compute-bound "at S=240", the G -> oo
      // limit of T G / (G + 1); for MHA (G = 1) it is 2 x critical, inference.md's "> 480".
      {"inference.md, attention arithmetic intensity", "MHA prefill compute-bound above T (~480)",
       attention_roofline(mha, v5e).compute_bound_context, 480, 0.02},
      {"transformers.md, Q4", "GQA prefill intensity T G / (G + 1), G = 8",
       attention_roofline(gqa, v5e).roofline.intensity, 8192 * 8 / 9.0, kExact},
      {"transformers.md, Q4", "GQA decode intensity -> G", attention_roofline(gqa, v5e).decode_intensity_limit, 8,
       kExact},
  });
  // The large-D/F approximation of the critical batch, next to the exact value.
  const MatmulSpec big{.b = 256, .d = 65536, .f = 65536};
  MatmulSpec big_int8_w = big, big_int8 = big;
  big_int8_w.w = int8;
  big_int8.x = big_int8.w = big_int8.out = int8;
  check({
      {"roofline.md, Matrix multiplication", "B > 1.97e14 / 8.2e11 = 240 (B << D, F)",
       matmul_critical_batch_approx(big, v5e), 240, kBook},
      {"roofline.md, Q1 int8 matmul", "B > 486 / 2 = 243", matmul_critical_batch_approx(big_int8, v5e), 243, kExact},
      {"roofline.md, Q2 int8 + bf16 matmul", "B > 120", matmul_critical_batch_approx(big_int8_w, v5e), 120, kBook},
      {"roofline.md, Q1 int8 matmul", "the exact batch at D = F = 65536 is within 1% of it",
       matmul_critical_batch(big_int8, v5e), 243, 0.01},
      {"tpus.md, Worked Problems Q4", "... and at D = 4096, F = 16384 it is not (263 vs 243)",
       matmul_critical_batch(q4, v5e) / matmul_critical_batch_approx(q4, v5e), 263.0 / 243, 0.01},
  });
  // Tile padding (tpus.md: weights pad to the MXU edge, 128; 256 on v6e).
  const PaddedMatmul tiny = pad_to_tile({.b = 512, .d = 100, .f = 300}, hardware("tpu-v6e").facts.mxu_size);
  CHECK(tiny.padded.d == 256);
  CHECK(tiny.padded.f == 512);
  CHECK(tiny.useful_fraction == doctest::Approx(100.0 * 300 / (256 * 512)).scale(0));
  CHECK(tiny.padded_elements == 256 * 512 - 100 * 300);  // the zeros W gains
  CHECK(pad_to_tile({.b = 8, .d = 8192, .f = 28672}, 128).useful_fraction == 1);
  CHECK_THROWS_WITH_AS(pad_to_tile({.b = 8, .d = 8, .f = 8}, 0), doctest::Contains("tile 0 must be at least 1"),
                       shardlab::UserError);
  // A matmul too thin to be compute-bound at any batch: the exact batch is infinite.
  CHECK(std::isinf(matmul_critical_batch({.b = 512, .d = 256, .f = 512}, v5e)));
  // Elementwise x + y over bf16: 1 FLOP per 6 bytes, far below any chip's critical intensity.
  const Roofline add = elementwise_roofline(n, 2, 1, bf16, v5e);
  CHECK(add.flops == n);
  CHECK(add.bytes == 6 * n);
  CHECK_FALSE(add.compute_bound);
  CHECK(add.t_comms == doctest::Approx(6 * n / 8.1e11).scale(0));
  // gpus.md Quiz 1 Q7: adding two fp32[N] vectors on an H100 moves 12N bytes for N FLOPs.
  const HardwareProfile& h100 = hardware("h100");
  const char* add_q7 = "gpus.md, Quiz 1 Q7 [Estimating H100 add runtime]";
  check({
      {add_q7, "N FLOPs / 12N bytes = 1/12", elementwise_roofline(n, 2, 1, DType::kFp32, h100).intensity, 1.0 / 12,
       kExact},
      {add_q7, "N = 65,536: 12N / 3.35e12 = 0.23 us", elementwise_roofline(65536, 2, 1, DType::kFp32, h100).t_comms,
       0.23e-6, kBook},
      {add_q7, "N = 1024^3: 'a roofline of about 3.84ms'",
       elementwise_roofline(1 << 30, 2, 1, DType::kFp32, h100).t_comms, 3.84e-3, kBook},
      {add_q7, "the CUDA cores' intensity, 33.5e12 / 3.35e12 = 10",
       vector_alus(h100) * h100.facts.clock_hz / h100.hbm_bandwidth, 10, kBook},
  });
  // An einsum that is a matmul prices exactly as the matmul calculator.
  const Roofline mm = einsum_roofline("bd,df->bf", {{'b', 4096}, {'d', 8192}, {'f', 32768}}, {bf16}, v5e);
  const Roofline direct = matmul_roofline({.b = 4096, .d = 8192, .f = 32768}, v5e);
  CHECK(mm.flops == direct.flops);
  CHECK(mm.bytes == direct.bytes);
  CHECK(mm.compute_bound == direct.compute_bound);
  // No contraction: one op per point (an outer product).
  CHECK(einsum_roofline("b,f->bf", {{'b', 8}, {'f', 4}}, {bf16}, v5e).flops == 32);
  CHECK(parse_einsum("bd,df->bf").contracted() == "d");
  CHECK_THROWS_WITH_AS(parse_einsum("bd,df"), doctest::Contains("has no '->'"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(parse_einsum("bd,df->bz"), doctest::Contains("output dim z is in no input"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(einsum_roofline("bd,df->bf", {{'b', 8}, {'d', 8}}, {bf16}, v5e),
                       doctest::Contains("dim f has no positive size"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(attention_roofline({.q_len = 8, .kv_len = 8, .heads = 6, .kv_heads = 4, .head_dim = 8}, v5e),
                       doctest::Contains("do not divide"), shardlab::UserError);
}

TEST_CASE("point-to-point transfers and the message size where a collective turns latency-bound (chapters 2-3)") {
  const HardwareProfile& v5e = hardware("tpu-v5e");
  const HardwareProfile& v4p = hardware("tpu-v4p");
  // tpus.md Q5: bf16[8, 128, 8192] from TPU{0,0} to TPU{3,3} of a v5e 4x4 (no wraparound).
  const double array = 2.0 * 8 * 128 * 8192;
  const TransferCost corner = transfer_cost(array, {4, 4}, {0, 0}, {3, 3}, v5e);
  const auto threshold = [](const CollectiveCost& c, double bytes) {
    return latency_bound_bytes(c.latency_seconds, c.bandwidth_seconds, bytes);
  };
  const CollectiveCost pod_axis = collective_cost(CollectiveOp::kAllGather, 64e6, {16}, v5e);
  const CollectiveCost small_y = collective_cost(CollectiveOp::kAllGather, 2.0 * 256 * 256, {4}, v5e);
  const CollectiveCost tiny_x = collective_cost(CollectiveOp::kAllGather, 256, {4}, v4p);
  const CollectiveCost pod_a2a = collective_cost(CollectiveOp::kAllToAll, 64e6, {16}, v5e);
  check({
      {"tpus.md, Worked Problems Q5", "hops from (0,0) to (3,3) on a 4x4 without wraparound",
       static_cast<double>(corner.hops), 6, 1e-12},
      {"tpus.md, Worked Problems Q5", "links used at once (half right, half down)", static_cast<double>(corner.links),
       2, 1e-12},
      {"tpus.md, Worked Problems Q5", "first byte after 6 hops x 1 us", corner.first_byte_seconds, 6e-6, kExact},
      // The book rounds the array to 1.7e7 B (188 us); 16.8 MB / 9e10 B/s is 186 us.
      {"tpus.md, Worked Problems Q5", "whole transfer, 188 + 6 us", corner.seconds, 194e-6, kBook},
      {"sharding.md, A note on ICI latency", "v5e shards below W t = 45 kB are latency-bound (16-chip axis)",
       threshold(pod_axis, 64e6) / 16, 45e3, kExact},
      // An AllToAll moves 1/4 of an AllGather's bytes per link over as many hops (n/2), so it
      // stays latency-bound up to 4x the size: 4 n W t = 2.88 MB on the 16-chip axis.
      {"sharding.md, the AllToAll (1/4 the cost of an AllGather)", "v5e all_to_all latency-bound below 4 n W t",
       threshold(pod_a2a, 64e6), 4 * 16 * 45e3, kExact},
      {"sharding.md, Pop Quiz 2 (E = F = 256)", "AllGather_Y over 4 v5e: 3 hops x 1 us", small_y.seconds, 3e-6,
       kExact},
      {"sharding.md, Q3 latency-bound AllGather", "AllGather_X of 256 B over 4 v4p: 2 hops, ~2 us", tiny_x.seconds,
       2e-6, kExact},
  });
  CHECK(small_y.latency_bound);                          // 131 kB < 4 x 45 kB (no wraparound: 3 hops of V/4)
  CHECK(threshold(small_y, 2.0 * 256 * 256) == doctest::Approx(4 * 45e3).scale(0));
  CHECK(tiny_x.latency_bound);
  CHECK_FALSE(pod_axis.latency_bound);
  // Latency-bound exactly below the threshold: priced there, both terms are equal.
  const CollectiveCost at = collective_cost(CollectiveOp::kAllReduce, threshold(pod_axis, 64e6), {16}, v5e);
  CHECK(at.latency_seconds == doctest::Approx(at.bandwidth_seconds).scale(0));
  // With wraparound the route goes the short way; coordinates are checked.
  CHECK(torus_transfer(1e6, {{16, true}}, {0}, {15}, v5e.ici).hops == 1);
  CHECK(torus_transfer(1e6, {{16, false}}, {0}, {15}, v5e.ici).hops == 15);
  CHECK(transfer_cost(1e6, {4, 4}, {1, 1}, {1, 1}, v5e).seconds == 0);
  CHECK_THROWS_WITH_AS(transfer_cost(1e6, {4, 4}, {0, 0}, {4, 0}, v5e), doctest::Contains("--to coordinate 4 is outside"),
                       shardlab::UserError);
  // GPUs: one NVLink hop inside a node, the NIC between nodes.
  const HardwareProfile& h100 = hardware("h100");
  const TransferCost nvlink = transfer_cost(1e9, {16}, {0}, {7}, h100);
  const TransferCost ib = transfer_cost(1e9, {16}, {0}, {8}, h100);
  CHECK(nvlink.path == "nvlink");
  CHECK(nvlink.bandwidth_seconds == doctest::Approx(1e9 / 450e9).scale(0));
  CHECK(ib.path == "infiniband");
  CHECK(ib.bandwidth_seconds == doctest::Approx(1e9 / 50e9).scale(0));
  CHECK(latency_bound_bytes(0, 1, 1e6) == 0);
}

// tpus.md Question 6: int8[128K, 128K] (the book's "about 16GB"; 2^34 B = 17.2 GB) sharded
// over the host DRAM of a v5e 4x4 (2 hosts), brought to TPU{0,0} and multiplied by
// bf16[8, 128K]. The book prices 16e9 B: PCIe 66 ms, ICI 167 ms, HBM 19 ms, FLOPs 1.3 ms
// (2.75e11 / 1.97e14 is 1.4 ms), "about 150-200 ms" pipelined.
TEST_CASE("host DRAM offload over PCIe, ICI and DCN (tpus.md Q6)") {
  const double n = 128 * 1024;
  const OffloadSpec book{.bytes = 16e9, .mesh = {4, 4}, .to = {0, 0}, .flops = 2 * 8 * n * n,
                         .activation_bytes = 2 * 8 * n};
  const HostOffload o = host_offload(book, hardware("tpu-v5e"));
  const char* const q6 = "tpus.md, Worked Problems Q6";
  check({
      {q6, "hosts of a 4x4 (4x2 per host)", static_cast<double>(o.hosts), 2, 1e-12},
      {q6, "PCIe: 8 GB per host over 8 links at 1.5e10", o.via_ici.pcie_seconds, 66e-3, kBook},
      {q6, "ICI: 15 GB into TPU{0,0} over 2 links at 4.5e10", o.via_ici.ici_seconds, 15e9 / 9e10, kExact},
      {q6, "HBM: 16e9 / 8.1e11 (book: 19 ms)", o.via_ici.hbm_seconds, 16e9 / 8.1e11, kExact},
      {q6, "FLOPs 2.75e11 / 1.97e14 (book: 1.3 ms)", o.via_ici.math_seconds, 1.4e-3, 0.01},
      {q6, "pipelined: the ICI gather, within the book's 150-200 ms", o.via_ici.pipelined_seconds, 15e9 / 9e10, kExact},
      {q6, "route 1, all 16 GB over TPU{0,0}'s one PCIe link", o.via_dcn.pcie_seconds, 16e9 / 1.5e10, kExact},
      {q6, "route 1, host 1's 8 GB over DCN at 2.5e10", o.via_dcn.dcn_seconds, 8e9 / 2.5e10, kExact},
  });
  CHECK(o.via_ici.pipelined_seconds < o.via_dcn.pipelined_seconds);  // "option (2) is better"
  CHECK(o.via_ici.serial_seconds == doctest::Approx(o.via_ici.pcie_seconds + o.via_ici.ici_seconds +
                                                    o.via_ici.hbm_seconds + o.via_ici.math_seconds).scale(0));
  // Inside the mesh TPU{1,1} has 4 links in; on a wrapping 16x16 pod every chip has 4.
  CHECK(host_offload({.bytes = 16e9, .mesh = {4, 4}, .to = {1, 1}}, hardware("tpu-v5e")).ici_links_in == 4);
  CHECK(host_offload({.bytes = 16e9, .mesh = {16, 16}, .to = {0, 0}}, hardware("tpu-v5e")).ici_links_in == 4);
  CHECK_THROWS_WITH_AS(host_offload({.bytes = 16e9, .mesh = {4, 4}, .to = {4, 0}}, hardware("tpu-v5e")),
                       doctest::Contains("outside axis 0"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(host_offload(book, hardware("h100")), doctest::Contains("--pcie-bw"), shardlab::UserError);
}

// roofline.md Question 3: the roofline plot of Question 2's bf16 x int8 matmul, FLOP/s
// against B (the book draws no figures): for B << D, F the intensity is 2B, so a v5e
// reaches 2 B x 8.1e11 FLOP/s until the 1.97e14 peak near B = 120.
TEST_CASE("a matmul's FLOP/s against its batch: the roofline plot (roofline.md Q3)") {
  const auto reached = [](int64_t b, int64_t d) {
    return matmul_roofline({.b = b, .d = d, .f = 4 * d, .w = DType::kInt8}, hardware("tpu-v5e")).achieved_flops;
  };
  check({
      {"roofline.md, Q3", "B = 1, D = 16384: 2 x 8.1e11", reached(1, 16384), 2 * 8.1e11, 0.01},
      {"roofline.md, Q3", "B = 64, D = 16384: 2B x 8.1e11", reached(64, 16384), 128 * 8.1e11, 0.02},
      {"roofline.md, Q3", "B = 256: the 1.97e14 peak", reached(256, 16384), 1.97e14, kExact},
  });
  CHECK(reached(64, 1024) < reached(64, 16384));  // small D, F: the activations' bytes count
}

TEST_CASE("the four cases of a sharded matmul, side by side (chapter 3)") {
  const HardwareProfile& v5e = hardware("tpu-v5e");
  const MatmulSpec square{.b = 8192, .d = 8192, .f = 8192};
  const std::vector<MatmulCase> c = sharded_matmul_cases(square, 16, v5e);
  const MatmulSpec wide{.b = 4096, .d = 8192, .f = 32768};
  const char* where = "sharding.md, Computation With Sharded Arrays";
  REQUIRE(c.size() == 4);
  CHECK_FALSE(c[0].communicates);  // case 1: no communication
  check({
      {where, "case 1: the local shards' FLOPs, 2BDF / 16", c[0].flops_per_chip, 2.0 * 8192 * 8192 * 8192 / 16, kExact},
      {where, "case 2: AllGather X[B, D] first, bf16 B D bytes", c[1].comm_bytes, 2.0 * 8192 * 8192, kExact},
      {where, "case 2: every chip then multiplies whole (16x case 1's FLOPs)", c[1].flops_per_chip / c[0].flops_per_chip,
       16, kExact},
      // sharding.md, "A Deeper Dive into TPU Communication Primitives": an AllReduce costs
      // twice an AllGather of the same array (a ReduceScatter then an AllGather).
      {where, "case 3's AllReduce of Y[B, F] vs case 4's AllGather of W[D, F] (B = F): 2x", c[2].t_comms_s / c[3].t_comms_s,
       2, 0.01},
      {where, "case 3 = matmul --shards (contraction_sharded_matmul)", sharded_matmul_cases(wide, 4, v5e)[2].t_comms_s,
       contraction_sharded_matmul(wide, 4, v5e).roofline.t_comms, kExact},
  });
  CHECK_THROWS_AS(sharded_matmul_cases(square, 3, v5e), shardlab::UserError);  // 3 does not divide 8192
}

// sharding.md, Questions 4 and 9: one operand sharded on the contracting D, gather it or
// multiply the shards and reduce the output. (The book's Q4 answer counts the gather as
// 2BD bytes; W[D, F] in bf16 is 2DF, which gives its own condition D > 2B.)
TEST_CASE("gather the sharded operand or reduce the output (sharding.md Q4, Q9)") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  const MatmulSpec m{.b = 4096, .d = 8192, .f = 32768};
  const GatherOrReduce q4 = gather_or_reduce(m, 4, ShardedOperand::kWeight, v5p);
  const GatherOrReduce q9 = gather_or_reduce(m, 4, ShardedOperand::kActivation, v5p);
  const char* q4_where = "sharding.md, Question 4";
  check({
      {q4_where, "the AllReduce beats the whole multiply iff D > 2 C / W_ici = 5100", q4.all_reduce_under_whole_math_d,
       5100, 0.01},
      {q4_where, "the shards' multiply covers the AllReduce iff X < D / 5100", q4.reduce_compute_bound_d / 4, 5100, 0.01},
      {q4_where, "FLOPs: 2BDF / X against 2BDF", q4.gather.flops_per_chip / q4.all_reduce.flops_per_chip, 4, kExact},
      {q4_where, "the AllReduce sends 2 x 2BF bytes, the gather 2DF: D > 2B", q4.all_reduce_moves_less_d, 2.0 * m.b, 0.01},
      {"sharding.md, Question 9 (b)", "a ReduceScatter costs half the AllReduce", q4.reduce_scatter.t_comms_s /
       q4.all_reduce.t_comms_s, 0.5, 0.01},
      {"sharding.md, Question 9 (c)", "gather A[N, M] against reduce-scatter O[N, K]: ratio M / K (here D / F)",
       q9.gather.t_comms_s / q9.reduce_scatter.t_comms_s, static_cast<double>(m.d) / m.f, 0.01},
      {"sharding.md, Question 9 (c)", "so the ReduceScatter moves less iff D > F", q9.reduce_scatter_moves_less_d,
       static_cast<double>(m.f), 0.01},
  });
  CHECK(q9.gather.t_comms_s == sharded_matmul_cases(m, 4, v5p)[1].t_comms_s);  // case 2's AllGather of X
  CHECK_THROWS_AS(gather_or_reduce(m, 3, ShardedOperand::kWeight, v5p), shardlab::UserError);
}

TEST_CASE("a collective's bytes per link and an MoE's critical batch (chapters 3, 5, 12)") {
  const HardwareProfile& v5e = hardware("tpu-v5e");
  const HardwareProfile& h100 = hardware("h100");
  const double v = 64.0 * (1 << 20);
  check({
      // collective prints bandwidth_seconds x the link's bytes/s as "per link".
      {"sharding.md, AllGather: T = V / (2 W_ici) on a bidirectional ring", "bytes per link direction, 16 v5e",
       collective_cost(CollectiveOp::kAllGather, v, {16}, v5e).bandwidth_seconds * v5e.ici.bandwidth, v / 2, kExact},
      {"gpus.md, AllReduce within a node: 2 (N-1)/N x V out of each GPU", "bytes out of each of 8 H100s",
       collective_cost(CollectiveOp::kAllReduce, v, {8}, h100).bandwidth_seconds * h100.ici.bandwidth, 1.75 * v,
       kExact},
      // train prints it for a model with experts (mixtral-8x7b: E = 8, k = 2).
      {"training.md, MoE: each expert sees k/E of the tokens", "v5p critical batch x E/k = 2550 x 4",
       moe_critical_batch(dp_critical_batch(hardware("tpu-v5p")), 8, 2), 10.2e3, 0.01},
  });
}
