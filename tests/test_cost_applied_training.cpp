// The book's training chapters at scale: LLaMA-3 70B's batch sharded over a context axis
// on a v5p pod, and several pods joined by DCN with chapter 6's worked problems, as tables
// (tests/book_figure.h). (test_cost_book_figures.cpp holds the calculators' figures.)
#include <doctest/doctest.h>

#include <string>

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/network/multipod.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/run_totals.h"
#include "parallel/cost/training/tpu_conditions.h"
#include "parallel/cost/training/train_step.h"
#include "tests/book_figure.h"

using namespace shardlab::cost;
using shardlab::test::check;
using shardlab::test::kBook;
using shardlab::test::kExact;

// applied-training.md, "How to shard LLaMA 3-70B for training": a 4M-token batch of 1024
// sequences of 4096 tokens on a v5p pod. The book's FSDP x TP pick, 2048 x 4, is 8192
// chips; the full pod's 8960 = 2^8 x 35 only splits with a 35-way (padded) context axis.
TEST_CASE("context parallelism: LLaMA-3 70B's 4M-token batch on a v5p pod (applied-training)") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  TrainConfig c;
  c.model = model_preset("llama3-70b");
  c.batch_tokens = 4 << 20;
  c.model.context = 4096;
  const char* source = "applied-training.md, How to shard LLaMA 3-70B for training";
  // Q1: without context parallelism the batch axes stop at 1024 chips, one sequence each.
  CHECK(layout_problem(c, {.fsdp = 2048}).find("does not split into 2048") != std::string::npos);
  CHECK(layout_problem(c, {.fsdp = 1024, .context = 2}).empty());
  // Q2: FSDP over batch and sequence on all 8960 chips: 468 tokens per chip, below the 850
  // that FSDP over a pod's three axes needs, so communication-bound.
  const StepEstimate fsdp_only = estimate_train_step(c, {.fsdp = 256, .context = 35}, v5p);
  check({{source, "tokens per chip, 4M / 8960 (35-way context shards pad 4096 to 4130)", fsdp_only.tokens_per_chip,
          468, 0.01},
         {source, "FSDP's critical batch over 3 axes", dp_critical_batch(v5p, 3), 850, kBook}});
  CHECK_FALSE(fsdp_only.compute_bound);
  // Q3: FSDP x TP stays compute-bound; the planner's best on 8192 chips shards the batch
  // 1024 ways (data x fsdp), each sequence 2 ways (context) and the model 4 ways (the book's takeaway).
  const Plan plan = plan_training(c, 8192, v5p);
  REQUIRE(plan.feasible > 0);
  const StepEstimate& best = plan.ranked.front().estimate;
  CHECK(best.layout.data * best.layout.fsdp == 1024);
  CHECK(best.layout.context == 2);
  CHECK(best.layout.tensor == 4);
  CHECK(best.compute_bound);
  // Its step at peak is 6 x 70e9 x 4M / (8192 x 4.59e14) = 0.468 s in the book's 6P
  // arithmetic; the cost model adds attention's FLOPs (+7%).
  check({{source, "step at peak FLOP/s, 6PT / (8192 C)", best.step_seconds, 6 * 70e9 * (4 << 20) / (8192 * 4.59e14),
          kBook},
         {source, "the book's FSDP x TP layout: 2048 x 4 chips", 2048.0 * 4, static_cast<double>(best.layout.num_ranks()), kExact}});
  // Attention over the 2-way context axis, all-gathered (LLaMA 3's choice), gathers one
  // sequence's K and V per layer: 4096 tokens x 2 x (8 kv heads / 4) x 128 x 2 B.
  TrainConfig gathered = c;
  gathered.context_comm = ContextComm::kAllGather;
  const StepEstimate book_layout = estimate_train_step(gathered, {.fsdp = 1024, .context = 2, .tensor = 4}, v5p);
  double kv_bytes = 0;
  for (const AxisComm& comm : book_layout.comms)
    if (comm.axis == "context" && comm.op == CollectiveOp::kAllGather) kv_bytes = comm.bytes;
  CHECK(kv_bytes == doctest::Approx(4096.0 * 2 * 2 * 128 * 2).scale(0));
  // The full pod now plans: its best layout shards the sequence (35-way context) beside 4-way TP.
  const Plan pod = plan_training(c, 8960, v5p);
  REQUIRE(pod.feasible > 0);
  CHECK(pod.ranked.front().estimate.layout.context > 1);
  CHECK(pod.ranked.front().estimate.layout.tensor == 4);
  // The book's conditions behind its pick, and the sequence sharding it leaves unpriced
  // ("additional communication complexity during attention ... let's ignore that"): as a
  // ring (the default here), each chip's 2048 positions outlast the 1275 below which a
  // ring step's K/V transfer shows, so only each layer's last dK/dV is exposed (0.4% of the step).
  const LayoutConditions k = layout_conditions(c, best, v5p);
  check({{source, "FSDP+TP discriminant, 2 x 2550^2 / F", 2 * fsdp_tp_critical_batch(28672, v5p, 1, 1), 453, 0.01},
         {source, "pure model parallelism ICI-bound above Y = F / 2550", tp_max_degree(28672, v5p), 11, 0.03},
         {source, "sequence batch size: 4M tokens of 4K sequences", c.batch_tokens / c.model.context, 1024, kExact},
         {"training.md + applied-training.md", "ring attention: positions per chip of a 2-way context axis",
          k.ring_tokens_per_shard, 2048, kExact},
         {"training.md + applied-training.md", "ring attention hides its K/V above C K bytes / (2 N W v) positions",
          k.ring_critical, 1275, kExact}});
  CHECK(c.context_comm == ContextComm::kRing);
  CHECK(k.ring_tokens_per_shard > k.ring_critical);
  CHECK(best.ring_exposed_seconds < 0.01 * best.step_seconds);
}

// training.md, "Scaling Across Pods" and its takeaways: pure data parallelism over DCN
// between pods, FSDP and TP within each; applied-training.md's worked problems on 4 and 8
// pods, which the book leaves unanswered: the rows give the inputs and what follows from
// the book's own rules.
TEST_CASE("several pods joined by DCN: the per-pod critical batch and the worked problems (chapters 5-6)") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  const char* pods = "training.md, Scaling Across Pods";
  TrainConfig two;  // LLaMA-3 70B with a 2M-token batch on 2 pods
  two.model = model_preset("llama3-70b");
  two.batch_tokens = 2 << 20;
  const Plan two_pods = plan_training(two, 2 * 8960, v5p);
  REQUIRE(two_pods.feasible > 0);
  const LayoutConditions k2 = layout_conditions(two, two_pods.ranked.front().estimate, v5p);
  check({
      {pods, "DCN per chip: 25 GB/s per host over 4 chips", v5p.facts.dcn_bandwidth_per_host / v5p.facts.chips_per_host,
       6.25e9, kExact},
      {pods, "the profile's DCN link per chip", v5p.dcn.bandwidth, 6.25e9, kExact},
      // The book prints 4.46e14 / 6.25e9 = 71,360: right arithmetic on a C that is not the
      // v5p's 4.59e14 of its own tables (and of this section's LLaMA sums); C / W_dcn is 73,440.
      {pods, "C / W_dcn, tokens per pod (book: 71,360 from C = 4.46e14)", dcn_critical_batch_per_pod(v5p), 73440,
       kExact},
      {"training.md, Takeaways", "the DCN critical batch, 'roughly 75,000' per pod", dcn_critical_batch_per_pod(v5p),
       75000, kBook},
      {pods, "FSDP alone over 3 axes with a 2M batch: at most ~2400 chips", 2e6 / dp_critical_batch(v5p, 3), 2400, kBook},
      {pods, "TP up to M_Y F / 2550 ~ 11 M_Y (F ~ 30,000)", tp_max_degree(30000, v5p, 1), 11, kBook},
      {pods, "FSDP+TP comms-bound below 2550^2 / (2 x 30,000) = 108", fsdp_tp_critical_batch(30000, v5p, 2, 1), 108,
       0.01},
      {pods, "... so a 2M batch scales to roughly 18k chips", 2e6 / fsdp_tp_critical_batch(30000, v5p, 2, 1), 18e3,
       kBook},
      {pods, "2 pods, BS = 2M: a per-pod batch of 1M", k2.tokens_per_pod, 1e6, kBook},
      {pods, "... and per chip 111 (2e6 / 17920; 2M = 2^21 gives 117)", k2.tokens_per_chip, 111, kBook},
  });
  CHECK(k2.pods == 2);
  CHECK(k2.dcn_hidden);

  // Worked problem 1: LLaMA 3-70B on 4 pods with the same 4M-token batch of 4K sequences.
  const char* q1 = "applied-training.md, Worked Problems Q1";
  TrainConfig c;
  c.model = model_preset("llama3-70b");
  c.model.context = 4096;
  c.batch_tokens = 4 << 20;
  const Plan four = plan_training(c, 4 * 8960, v5p);
  REQUIRE(four.feasible > 0);
  const StepEstimate& best = four.ranked.front().estimate;
  const LayoutConditions k = layout_conditions(c, best, v5p);
  const RunTotals days = run_totals({.params = 70e9, .tokens = 15e12, .chips = 4 * 8960, .mfu = 0.4}, v5p);
  check({{q1, "4 pods of 8960 chips", static_cast<double>(k.pods), 4, kExact},
         {q1, "tokens per pod, 4M / 4, far above C / W_dcn", k.tokens_per_pod, 1.05e6, 0.01},
         {q1, "tokens per chip, 4M / 35840 (context shards of 35 pad to 4130)", k.tokens_per_chip, 117, 0.01},
         {q1, "... just above FSDP+TP's 2550^2 / 2F = 113 (the correct bound: ICI, not DCN)",
          fsdp_tp_critical_batch(28672, v5p, 2, 1), 113, 0.01},
         {q1, "days at 40% MFU: the book's 44 days on one pod / 4", days.days, 44.0 / 4, kBook}});
  CHECK(k.dcn_hidden);
  CHECK(best.fits);
  // The book's recipe, pure DP over the pods and FSDP x TP inside each, runs out of room in
  // a pod of 2^8 x 35 chips: 256 sequences per pod force a 35-way context axis, and the
  // FSDP group of 1120 (or 2240) sees too few tokens per gather, so it is ICI-bound.
  const StepEstimate recipe = estimate_train_step(c, {.data = 4, .fsdp = 32, .context = 35, .tensor = 8}, v5p);
  const LayoutConditions kr = layout_conditions(c, recipe, v5p);
  CHECK(kr.dcn_ways == 4);
  CHECK(kr.dcn_crossing_hidden);
  CHECK_FALSE(kr.compute_bound_by_book);
  CHECK_FALSE(recipe.compute_bound);
  CHECK(best.step_seconds < recipe.step_seconds);

  // Worked problem 2: LLaMA 3-405B; (b) on 8 pods with its final 16M-token batch of 8K
  // sequences (the book names no batch; LLaMA 3's paper ends at 16M).
  const char* q2 = "applied-training.md, Worked Problems Q2";
  TrainConfig big;
  big.model = model_preset("llama3-405b");
  big.batch_tokens = 16 << 20;
  const ParamCounts p = count_params(big.model);
  const Plan eight = plan_training(big, 8 * 8960, v5p);
  REQUIRE(eight.feasible > 0);
  const LayoutConditions k8 = layout_conditions(big, eight.ranked.front().estimate, v5p);
  const RunTotals run405 = run_totals({.params = p.matmul, .tokens = 15e12, .chips = 8 * 8960, .mfu = 0.4}, v5p);
  check({{q2, "(a) LLaMA 3-405B's parameters", p.total, 405e9, 0.01},
         {q2, "(a) FLOPs per token, 6N", 6 * p.matmul, 6 * 405e9, 0.01},
         {q2, "(a) FLOPs for 15T tokens", run405.train_flops, 6 * 405e9 * 15e12, 0.01},
         {q2, "(b) 8 pods", static_cast<double>(k8.pods), 8, kExact},
         {q2, "(b) tokens per pod, 16M / 8", k8.tokens_per_pod, 2.1e6, 0.01},
         {q2, "(b) days at 40% MFU", run405.days, 32, kBook}});
  CHECK(k8.dcn_hidden);
  // 2048 sequences on 71,680 chips shard each 35 ways: 235 positions per chip. As a ring
  // that is below the 637 (N/K = 16) a step's block attention needs to hide its K/V, so
  // the book's conditions with the ring's term say communication-bound; all-gathered, the
  // traffic the book leaves out, each axis hides under compute as its max form has it.
  CHECK(k8.ring_tokens_per_shard == 235);
  CHECK(k8.ring_critical == doctest::Approx(637.5).scale(0));
  CHECK_FALSE(k8.compute_bound_by_book);
  TrainConfig gathered = big;
  gathered.context_comm = ContextComm::kAllGather;
  const StepEstimate& best405_layout = eight.ranked.front().estimate;
  CHECK(layout_conditions(gathered, estimate_train_step(gathered, best405_layout.layout, v5p), v5p).compute_bound_by_book);
  // The cost model adds the axes' traffic (none overlaps another) and the ring's stalls,
  // which come to ~20% over the compute.
  const StepEstimate& best405 = eight.ranked.front().estimate;
  CHECK(best405.step_seconds < 1.25 * best405.compute_seconds);
}
