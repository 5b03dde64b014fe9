// The book's worked figures of how far a training run scales and how long it takes, as
// tables (tests/book_figure.h): the most chips a global batch keeps compute-bound and the
// least batch a slice needs (parallel/cost/training/axis_conditions.h, `shardlab-plan train`'s
// "scale:" lines), the FSDP x TP split of a chip count and TP's usable degree, training time
// at an achieved MFU and the MFU achieved in GPU-hours, and rematerialisation's FLOPs in a
// run's totals (parallel/cost/training/run_totals.h, `shardlab-plan totals`).
#include <doctest/doctest.h>

#include "framework/error.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/run_totals.h"
#include "tests/book_figure.h"

using namespace shardlab::cost;
using shardlab::nn::Remat;
using shardlab::test::check;
using shardlab::test::kBook;
using shardlab::test::kExact;

TEST_CASE("the most chips a batch keeps compute-bound, the least batch a slice needs (training.md, gpus.md)") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  const HardwareProfile& h100 = hardware("h100");
  HardwareProfile h800 = h100;
  h800.ici.bandwidth = 300e9;  // gpus.md: "H800 GPUs with lower 300GB/s of bandwidth"
  const double fsdp3 = dp_critical_batch(v5p, 3);  // 2550 / 3 = 850 tokens per chip
  const char* dp = "training.md, Data Parallelism";
  const char* fsdp = "training.md, Fully-Sharded Data Parallelism (FSDP)";
  const char* pods = "training.md, Scaling Across Pods";
  const char* gpu = "gpus.md, Data Parallelism";
  check({
      {dp, "DP over 3 axes: BS = 850 per chip", fsdp3, 850, kExact},
      {dp, "... 7.6M tokens per batch per pod of 8960 chips", batch_scale(fsdp3, 0, 8960).min_batch_tokens, 7.6e6,
       kBook},
      {fsdp, "DeepSeek-V2's ~40M tokens: 'roughly 47,000 chips'", batch_scale(fsdp3, 40e6, 1).max_chips, 47000, kBook},
      {fsdp, "LLaMA-3 70B's 16M tokens over 16e6 / (2550 / 3) = 18,823 chips", batch_scale(fsdp3, 16e6, 1).max_chips,
       18823, kExact},
      {pods, "FSDP with BS=2M over 3 axes: 'at most ~2400 chips'", batch_scale(fsdp3, 2e6, 1).max_chips, 2400, kBook},
      // F ~ 30,000 with M_X M_Y = 2: 2550^2 / (2 x 30000) = 108 tokens per chip.
      {pods, "FSDP + TP: B / N < 2550^2 / (2 x 30000) = 108", fsdp_tp_critical_batch(30000, v5p, 2, 1), 108, kBook},
      {pods, "... BS=2M 'lets us scale to roughly 18k chips'",
       batch_scale(fsdp_tp_critical_batch(30000, v5p, 2, 1), 2e6, 1).max_chips, 18000, kBook},
      {gpu, "LLaMA-3 on 16000 H100s: 'a batch size of at least 40M tokens' (2475 across nodes)",
       batch_scale(dp_critical_batch(h100, 1, true), 0, 16000).min_batch_tokens, 40e6, kBook},
      {gpu, "DeepSeek v3 on 2048 H800s: 990e12 / 300e9 = 3300 per GPU, 'about 6.7M'",
       batch_scale(dp_critical_batch(h800, 1), 0, 2048).min_batch_tokens, 6.7e6, kBook},
  });
  // training.md Q3: LLaMA-2 13B (F = 13824), a 3M-token batch of 32k sequences on a v5p
  // 16x16x16 slice.
  const FsdpTpSplit q3 = optimal_fsdp_tp_split(3e6, 13824, 4096, 2, 1);
  const char* q3_where = "training.md, Some Problems to Work Q3";
  check({
      {q3_where, "'a sequence batch size of 96' (3M = 3 x 2^20 over 32k)", 3.0 * (1 << 20) / 32768, 96, kExact},
      {q3_where, "FSDP alone: 'a minimum batch size of 850 * 4096 = 3.48M'",
       batch_scale(fsdp3, 3e6, 4096).min_batch_tokens, 3.48e6, kExact},
      {q3_where, "FSDP + TP: 2550^2 / 2F = 235", fsdp_tp_critical_batch(13824, v5p, 2, 1), 235, kExact},
      {q3_where, "X_opt = sqrt(3e6 * 2 * 4096 / 13824) = 1333", q3.x_opt, 1333, kExact},
      {q3_where, "'roughly 1024 way DP'", static_cast<double>(q3.fsdp), 1024, kExact},
      {q3_where, "'and 4 way TP'", static_cast<double>(q3.tensor), 4, kExact},
  });
  CHECK(batch_scale(fsdp3, 3e6, 4096).max_chips < 4096);  // "so we're actually comms-bound"
  // The two directions agree: a batch of chips x bound keeps exactly those chips busy.
  const BatchScale pod = batch_scale(fsdp3, 0, 8960);
  CHECK(batch_scale(fsdp3, pod.min_batch_tokens, 8960).max_chips == doctest::Approx(8960).epsilon(1e-12));
  CHECK_THROWS_AS(batch_scale(0, 1e6, 8), shardlab::UserError);
}

TEST_CASE("the FSDP x TP split of a chip count, and tensor parallelism's usable degree (training.md, gpus.md)") {
  const FsdpTpSplit cube = optimal_fsdp_tp_split(48000, 32768, 64, 2, 1);
  const FsdpTpSplit pod = optimal_fsdp_tp_split(4 << 20, 28672, 8960, 2, 1);
  const char* split = "training.md, Combining FSDP and Tensor Parallelism";
  const char* at = "applied-training.md, mixed tensor parallelism and FSDP";
  check({
      {split, "N = 64, B = 48,000, F = 32768: X ~ 13.9", cube.x_opt, 13.9, kBook},
      {split, "... X = 16", static_cast<double>(cube.fsdp), 16, kExact},
      {split, "... Y = 4", static_cast<double>(cube.tensor), 4, kExact},
      {at, "X_opt = sqrt(2 x 4.19e6 x 8960 / 28672) = 1618", pod.x_opt, 1618, kBook},
      {at, "'roughly 2048-way FSDP'", static_cast<double>(pod.fsdp), 2048, kExact},
      {at, "'and 4-way tensor parallelism'", static_cast<double>(pod.tensor), 4, kExact},
  });
  // A power-of-two chip count splits the same way whole; 8960 = 35 x 256 keeps the book's
  // Y = 4 with X = 2240, the divisor nearest 1618 on a log scale.
  CHECK(cube.whole_fsdp == 16);
  CHECK(cube.whole_tensor == 4);
  CHECK(pod.whole_fsdp * pod.whole_tensor == 8960);
  CHECK(pod.whole_fsdp == 2240);
  CHECK(pod.whole_tensor == 4);
  const HardwareProfile& h100 = hardware("h100");
  check({
      // "the limit is roughly F / 1995 = 14.372. Since this doesn't span 2 nodes, it
      // realistically means we'd go up to 8-way model parallelism."
      {"gpus.md, Quiz 5 Q2 [How to shard LLaMA-3 70B]", "F / 1995 = 14.4: 8-way",
       static_cast<double>(tp_degree(28672 / 1995.0, h100.node_size)), 8, kExact},
      {"gpus.md, Quiz 5 Q2 [How to shard LLaMA-3 70B]", "... the cost model's F W / C = 13: 8-way",
       static_cast<double>(tp_degree(tp_max_degree(28672, h100), h100.node_size)), 8, kExact},
      // "We can do Tensor Parallelism up to Y = M_Y F / 2550 ~ 11 M_Y": 8 on one axis.
      {"training.md, Scaling Across Pods", "Y < F / 2550 = 11.2 on one axis: 8-way",
       static_cast<double>(tp_degree(tp_max_degree(28672, hardware("tpu-v5p")), 8960)), 8, kExact},
  });
  CHECK(tp_degree(20, 8) == 16);   // two whole nodes of 8
  CHECK(tp_degree(150, 72) == 72);  // 128 would straddle two NVL72 domains: one of them
  CHECK(tp_degree(0.5, 8) == 1);
}

TEST_CASE("training time at an achieved MFU, and the MFU a run achieved in GPU-hours (gpus.md, transformers.md)") {
  const HardwareProfile& h100 = hardware("h100");
  const RunTotals h100s = run_totals({.params = 70e9, .tokens = 15e12, .chips = 4096, .mfu = 0.45}, h100);
  // transformers.md Q7 reads the H800's 3,026 TFLOP/s of fp8 with sparsity as 1.513e15 without.
  HardwareProfile h800 = h100;
  h800.flops_fp8 = 1.513e15;
  const double deepseek = train_flops(37e9, 14.8e12);
  const double hours = 2.79e6;
  const char* q2 = "gpus.md, Quiz 5 Q2 [How to shard LLaMA-3 70B]";
  const char* q7 = "transformers.md, Question 7";
  check({
      {q2, "6 x 70e9 x 15e12 = 6.3e24 bf16 FLOPs", h100s.train_flops, 6.3e24, kExact},
      {q2, "4096 H100s at 45% MFU: 1.8e18 FLOP/s", h100s.cluster_flops_per_second * 0.45, 1.8e18, kBook},
      {q2, "... 3.5e6 seconds", h100s.seconds, 3.5e6, kBook},
      {q2, "... or 40 days", h100s.days, 40, kBook},
      {q7, "2.79M H800 hours: 2.79e6 x 1.513e15 x 3600 = 1.52e25 FLOPs", hours * 3600 * peak_flops(h800, DType::kFp8),
       1.52e25, kExact},
      {q7, "6 x 37e9 x 14.8e12 = 3.3e24", deepseek, 3.3e24, kBook},
      {q7, "FLOPs utilization 3.3e24 / 1.52e25 = 21.7%", achieved_mfu(deepseek, hours, peak_flops(h800, DType::kFp8)),
       0.217, kBook},
      // The book divides its rounded 3.3e24; the exact 3.2856e24 gives 21.6%.
      {q7, "... exactly", achieved_mfu(deepseek, hours, peak_flops(h800, DType::kFp8)), 0.21621, kExact},
  });
  // The run's own chip-hours give back the MFU it was priced at.
  CHECK(h100s.chip_hours == doctest::Approx(4096 * h100s.seconds / 3600).epsilon(1e-12));
  CHECK(achieved_mfu(h100s.train_flops, h100s.chip_hours, h100s.chip_flops_per_second) ==
        doctest::Approx(0.45).epsilon(1e-12));
  CHECK_THROWS_AS(achieved_mfu(1e24, 0, 1e15), shardlab::UserError);
}

TEST_CASE("rematerialisation's FLOPs in a run's totals (transformers.md)") {
  const TransformerShape llama = model_preset("llama3-70b");
  const double full = train_flops_per_token(llama, Remat::Full) / train_flops_per_token(llama, Remat::None);
  const RunTotals remat = run_totals({.params = 70e9, .tokens = 15e12, .flops_multiplier = full}, hardware("tpu-v5p"));
  // Question 6: saving only the 7 matmul outputs recomputes Q K^T and softmax(Q K^T) V,
  // 4 B T^2 N H FLOPs a layer: 4 T N H L per token.
  const double t = static_cast<double>(llama.context), nh = static_cast<double>(llama.heads * llama.head_dim);
  check({
      {"transformers.md, Block remat", "6 x params x tokens -> 8 x params x tokens", remat.train_flops,
       8 * 70e9 * 15e12, kExact},
      {"transformers.md, Question 6", "save the 7 matmul outputs: 4 B T^2 N H extra per layer",
       train_flops_per_token(llama, Remat::SaveMatmulOutputs) - train_flops_per_token(llama, Remat::None),
       4 * t * nh * static_cast<double>(llama.layers), kExact},
  });
  CHECK_THROWS_AS(run_totals({.params = 1, .tokens = 1, .flops_multiplier = 0.5}, hardware("tpu-v5p")),
                  shardlab::UserError);
}
