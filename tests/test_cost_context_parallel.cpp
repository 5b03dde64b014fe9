// The context axis priced (parallel/cost/training/context_attention.h): ring attention's
// blocks, its transfers under each step's block attention and what they leave exposed, the
// all-gather variant beside it, the condition under which the ring hides, and what the
// planner may hand train_gpt. Every expected number is worked by hand in its comment.
#include <doctest/doctest.h>

#include <string>

#include "framework/error.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/context_attention.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/tpu_conditions.h"
#include "parallel/cost/training/train_step.h"

using namespace shardlab::cost;

TEST_CASE("ring attention: a step's FLOPs and block bytes, by hand") {
  // 4 x rows x Tq x Tk x N x H x visible = 4 x 2 x 1024 x 1024 x 8 x 64 x 1/2 = 2^31.
  CHECK(ring_block_flops(2, 1024, 1024, 8, 64) == 2147483648.0);
  CHECK(ring_block_flops(2, 1024, 1024, 8, 64, 1.0) == 2 * 2147483648.0);
  // rows x Tk x 2 x K x H x bytes = 2 x 1024 x 2 x 2 x 64 x 2 = 1 MiB.
  CHECK(ring_block_bytes(2, 1024, 2, 64, 2) == 1048576.0);
  CHECK(shardlab::parallel::parse_context_comm("ring") == ContextComm::kRing);
  CHECK(shardlab::parallel::parse_context_comm("allgather") == ContextComm::kAllGather);
  CHECK_THROWS_WITH_AS(shardlab::parallel::parse_context_comm("ulysses"), doctest::Contains("use ring or allgather"), shardlab::UserError);
}

TEST_CASE("ring attention: blocks per layer and what each step's compute leaves exposed") {
  // x = 40 us a block's transfer, f = 30 us a forward step's attention (backward's 60 us).
  const RingStep step{.block_bytes = 1 << 20, .transfer_seconds = 40e-6, .compute_seconds = 30e-6};
  const RingLayer four = ring_layer(step, 4);
  CHECK(four.forward_blocks == 3);   // c - 1 K/V blocks
  CHECK(four.backward_blocks == 7);  // c - 1 K/V and c dK/dV
  CHECK(four.forward_seconds == doctest::Approx(120e-6).scale(0));
  CHECK(four.backward_seconds == doctest::Approx(280e-6).scale(0));
  // Forward: 3 steps of max(0, 40 - 30) = 30 us.
  CHECK(four.forward_exposed == doctest::Approx(30e-6).scale(0));
  // Backward: first and last step one block under 60 us (0), the 2 middle ones two blocks
  // (80 - 60 = 20 us each), and the last dK/dV home with nothing to hide it (40): 80 us.
  CHECK(four.backward_exposed == doctest::Approx(80e-6).scale(0));
  const RingLayer two = ring_layer(step, 2);
  CHECK(two.forward_blocks == 1);
  CHECK(two.backward_blocks == 3);
  CHECK(two.forward_exposed == doctest::Approx(10e-6).scale(0));
  CHECK(two.backward_exposed == doctest::Approx(40e-6).scale(0));
  // Compute that outlasts every transfer hides all but the last dK/dV.
  const RingLayer hidden = ring_layer({.block_bytes = 1 << 20, .transfer_seconds = 40e-6, .compute_seconds = 50e-6}, 4);
  CHECK(hidden.forward_exposed == 0);
  CHECK(hidden.backward_exposed == doctest::Approx(40e-6).scale(0));
  CHECK(ring_layer(step, 1).forward_blocks == 0);
}

TEST_CASE("ring attention hides its K/V above C K bytes / (2 N W v) positions per chip") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  // LLaMA 3 (N = 64, K = 8) in bf16, head-tail balanced: 4.59e14 x 8 x 2 / (2 x 64 x 9e10 x 0.5) = 1275.
  CHECK(ring_attention_critical_tokens(v5p, 64, 8, 2) == doctest::Approx(1275).scale(0));
  // Only N/K matters (tensor parallelism divides both); the whole block visible halves it.
  CHECK(ring_attention_critical_tokens(v5p, 16, 2, 2) == doctest::Approx(1275).scale(0));
  CHECK(ring_attention_critical_tokens(v5p, 64, 8, 2, 1.0) == doctest::Approx(637.5).scale(0));
  // Multi-head attention (K = N) needs 8 times the positions.
  CHECK(ring_attention_critical_tokens(v5p, 64, 64, 2) == doctest::Approx(10200).scale(0));
}

TEST_CASE("the context axis in a training step: the ring beside the all-gather") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  TrainConfig c;
  c.model = model_preset("llama3-70b");
  c.model.context = 4096;
  c.batch_tokens = 4 << 20;
  // The planner's best on 8192 chips (test_cost_applied_training.cpp): one sequence per
  // data x fsdp rank, split over a context pair.
  const Layout book{.data = 2, .fsdp = 512, .context = 2, .tensor = 4};
  const StepEstimate ring = estimate_train_step(c, book, v5p);
  // A block: 1 row x 2048 positions x 2 x (8 / 4) kv heads x 128 x 2 bytes = 2 MiB.
  const double block = 2048.0 * 2 * 2 * 128 * 2;
  // One hop of 2 MiB over a v5p ICI link (9e10 B/s): 23.3 us. A step's attention:
  // 4 x 2048 x 2048 x 16 heads x 128 x 1/2 = 1.72e10 FLOPs at 4.59e14 = 37.4 us > 23.3: hidden.
  const double x = block / 9e10;
  int forward = 0, backward = 0;
  for (const AxisComm& comm : ring.comms) {
    if (comm.axis != "context") continue;
    CHECK(comm.op == CollectiveOp::kPermute);
    CHECK(comm.bytes == block);
    CHECK(comm.stalls);
    (comm.what.find("forward") != std::string::npos ? forward : backward) += comm.count;
  }
  CHECK(forward == 80);        // (c - 1) per layer
  CHECK(backward == 3 * 80);   // (c - 1) K/V + c dK/dV per layer
  // Exposed: the last dK/dV of each layer's backward alone.
  CHECK(ring.ring_exposed_seconds == doctest::Approx(80 * x).epsilon(1e-3).scale(0));
  CHECK(ring.step_seconds == doctest::Approx(ring.compute_seconds + ring.ring_exposed_seconds).scale(0));
  CHECK(ring.compute_bound);
  const LayoutConditions k = layout_conditions(c, ring, v5p);
  CHECK(k.ring_tokens_per_shard == 2048);
  CHECK(k.ring_critical == doctest::Approx(1275).scale(0));
  // The all-gather variant moves the whole sequence's K/V, overlapped with the step as the
  // book's collectives are, nothing stalled.
  c.context_comm = ContextComm::kAllGather;
  const StepEstimate gather = estimate_train_step(c, book, v5p);
  CHECK(gather.ring_exposed_seconds == 0);
  CHECK(layout_conditions(c, gather, v5p).ring_tokens_per_shard == 0);
  bool gathered = false;
  for (const AxisComm& comm : gather.comms)
    gathered |= comm.axis == "context" && comm.op == CollectiveOp::kAllGather && comm.bytes == 2 * block;
  CHECK(gathered);
  // 35-way context: 118 positions per chip, far below 1275: the ring cannot hide.
  c.context_comm = ContextComm::kRing;
  const StepEstimate thin = estimate_train_step(c, {.fsdp = 256, .context = 35}, v5p);
  const LayoutConditions kt = layout_conditions(c, thin, v5p);
  CHECK(kt.ring_tokens_per_shard == 118);
  CHECK(kt.comm_to_compute >= kt.ring_critical / 118);
  CHECK(thin.ring_exposed_seconds > 0);
}

TEST_CASE("train_gpt's context axis in the planner: what it trains, what it refuses") {
  TrainConfig c;
  c.model = shape_of(shardlab::nn::ModelConfig::preset("llama-tiny"));  // T = 16
  c.batch_tokens = 32.0 * 16;
  c.shardlab_activations = true;
  c.precision = fp32_training();
  CHECK(layout_problem(c, {.context = 2}).empty());
  CHECK(layout_problem(c, {.data = 2, .context = 4}).empty());
  // T must cut into 2 x context head-tail chunks: 16 does not into 2 x 16.
  CHECK(layout_problem(c, {.context = 16}).find("not a multiple of 32") != std::string::npos);
  // As parallel/layout.cpp: pipe composes, an MoE model (a preset's capacity) is refused.
  CHECK(layout_problem(c, {.context = 2, .pipe = 2}).empty());
  TrainConfig moe = c;
  moe.model = shape_of(shardlab::nn::ModelConfig::preset("llama-moe-tiny"));
  CHECK(layout_problem(moe, {.context = 2}).find("mixture-of-experts") != std::string::npos);
  // The planner ranks context layouts for train_gpt even where the batch covers the chips,
  // and each counts the rank's T/c positions.
  const Plan plan = plan_training(c, 4, hardware("tpu-v5e"));
  bool context = false;
  for (const PlanEntry& e : plan.ranked) context |= e.estimate.layout.context > 1;
  CHECK(context);
  bool with_pipe = false;
  for (const PlanEntry& e : plan.ranked) with_pipe |= e.estimate.layout.context > 1 && e.estimate.layout.pipe > 1;
  CHECK(with_pipe);
  const StepEstimate data = estimate_train_step(c, {.data = 2}, hardware("tpu-v5e"));
  const StepEstimate split = estimate_train_step(c, {.context = 2}, hardware("tpu-v5e"));
  CHECK(split.tokens_per_chip == data.tokens_per_chip);
  CHECK(split.memory.activations < data.memory.activations);
  CHECK(plan_training(moe, 4, hardware("tpu-v5e")).skipped.size() > 0);
}
