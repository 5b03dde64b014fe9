// A step priced as train_gpt predicts its own on CPU ranks (cost/training/cpu_step.h,
// TrainConfig::cpu_step): what the planner's --cluster local ranks layouts by.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "parallel/cost/model/transformer.h"
#include "parallel/cost/training/cpu_step.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/train_step.h"
#include "parallel/cost/training/zero_memory.h"

using namespace shardlab::cost;

namespace {

// A 2-core machine as `shardlab-plan calibrate` measures one: GEMM rate, memory bandwidth,
// a shared-memory link.
HardwareProfile cpu() {
  HardwareProfile p;
  p.name = "test-cpu";
  p.flops_fp32 = 100e9;
  p.flops_bf16 = 200e9;
  p.hbm_bytes = 16e9;
  p.hbm_bandwidth = 20e9;
  p.ici = {5e9, 2e-6};
  p.dcn = p.ici;
  return p;
}

TrainConfig gpt_bench(bool cpu_step) {
  TrainConfig c;
  c.model = model_preset("gpt-bench");
  c.batch_tokens = 8 * 256;
  c.precision = fp32_training();
  c.cpu_step = cpu_step;
  c.shardlab_activations = cpu_step;  // as --cluster local sets both
  return c;
}

}  // namespace

TEST_CASE("cpu_step's pieces: the optimizer's 9 floats per parameter, the element-wise work, the cores") {
  const HardwareProfile hw = cpu();
  const TrainConfig c = gpt_bench(true);
  const double params = count_params(c.model).total;
  CHECK(optimizer_seconds(c, Layout{}, hw, 1) == doctest::Approx(36.0 * params / hw.hbm_bandwidth));
  CHECK(optimizer_seconds(c, Layout{.data = 2}, hw, 2) == doctest::Approx(18.0 * params / hw.hbm_bandwidth));
  CHECK(optimizer_seconds(c, Layout{.tensor = 2}, hw, 1) == doctest::Approx(18.0 * params / hw.hbm_bandwidth));
  // Norms and residuals stay whole on every tensor rank: the split saves less than half.
  const double one = elementwise_seconds(c, Layout{}, hw), tp = elementwise_seconds(c, Layout{.tensor = 2}, hw);
  CHECK(tp > one / 2);
  CHECK(tp < one);
  CHECK(elementwise_seconds(c, Layout{.data = 2}, hw) == doctest::Approx(one / 2));
  CHECK(expert_padding_seconds(c, 1.25, 2, hw.flops_fp32) == 0.0);  // dense
  TrainConfig moe = c;
  moe.model.experts = 4, moe.model.top_k = 2;
  CHECK(expert_padding_seconds(moe, 1.25, 1, hw.flops_fp32) > 0.0);  // ceil(1.25 T k / E) slots > k per token
  CHECK(expert_padding_seconds(moe, 1.25, 2, hw.flops_fp32) ==
        doctest::Approx(expert_padding_seconds(moe, 1.25, 1, hw.flops_fp32) / 2));
  CHECK(core_sharing(2, 1, 2) == 1.0);
  CHECK(core_sharing(1, 2, 2) == 1.0);
  CHECK(core_sharing(4, 1, 2) == 2.0);
  CHECK(core_sharing(3, 1, 2) == 1.5);
}

TEST_CASE("cpu_step: compute plus the communication that cannot hide, not their max") {
  const HardwareProfile hw = cpu();
  const StepEstimate flops = estimate_train_step(gpt_bench(false), Layout{.tensor = 2}, hw);
  const StepEstimate tp = estimate_train_step(gpt_bench(true), Layout{.tensor = 2}, hw);
  // Compute adds the element-wise work and the optimizer's pass to the FLOPs at the GEMM rate.
  CHECK(tp.compute_seconds == doctest::Approx(flops.compute_seconds + elementwise_seconds(gpt_bench(true), {.tensor = 2}, hw) +
                                              optimizer_seconds(gpt_bench(true), {.tensor = 2}, hw, 1)));
  // The tensor axis's all_reduces sit between a layer's matmuls: all of them add to the step.
  double tensor_comm = 0;
  for (const AxisComm& comm : tp.comms) tensor_comm += comm.axis == "tensor" ? comm.seconds : 0.0;
  CHECK(tensor_comm > 0);
  CHECK(tp.step_seconds == doctest::Approx(tp.compute_seconds + tensor_comm));
  // DP's gradient all_reduce hides under the backward pass when it is shorter.
  const StepEstimate dp = estimate_train_step(gpt_bench(true), Layout{.data = 2}, hw);
  CHECK(dp.step_seconds == doctest::Approx(dp.compute_seconds));
  // A pipeline's bubble stretches the compute: (p - 1) / (m + p - 1) of the step idles.
  const StepEstimate pp = estimate_train_step(gpt_bench(true), Layout{.pipe = 2, .microbatches = 4}, hw);
  CHECK(pp.bubble_fraction == doctest::Approx(1.0 / 5.0));
}

TEST_CASE("cpu_step: ranks beyond the cores share them, so 4 ranks on 2 cores are no faster than 2") {
  const HardwareProfile hw = cpu();
  TrainConfig four = gpt_bench(true);
  four.core_sharing = core_sharing(4, 1, 2);
  const StepEstimate fsdp2 = estimate_train_step(gpt_bench(true), Layout{.fsdp = 2}, hw);
  const StepEstimate fsdp4 = estimate_train_step(four, Layout{.fsdp = 4}, hw);
  CHECK(fsdp4.compute_seconds == doctest::Approx(fsdp2.compute_seconds));
  // Without cpu_step the planner counts 4 chips as twice 2.
  const StepEstimate flops4 = estimate_train_step(gpt_bench(false), Layout{.fsdp = 4}, hw);
  CHECK(flops4.compute_seconds < 0.6 * fsdp2.compute_seconds);
}

TEST_CASE("the planner on CPU ranks orders DP before TP (TP repeats the norms on every rank), where FLOPs tie them") {
  const HardwareProfile hw = cpu();
  const auto rank_of = [](const Plan& plan, const std::string& layout) {
    for (size_t i = 0; i < plan.ranked.size(); ++i)
      if (layout_summary(plan.ranked[i].estimate.layout) == layout) return static_cast<int>(i);
    return -1;
  };
  const Plan cpu_plan = plan_training(gpt_bench(true), 2, hw);
  REQUIRE(rank_of(cpu_plan, "data=2") >= 0);
  REQUIRE(rank_of(cpu_plan, "tensor=2") >= 0);
  CHECK(rank_of(cpu_plan, "data=2") < rank_of(cpu_plan, "tensor=2"));
  const Plan flops_plan = plan_training(gpt_bench(false), 2, hw);
  const auto step = [&](const std::string& layout) {
    return flops_plan.ranked[rank_of(flops_plan, layout)].estimate.step_seconds;
  };
  CHECK(step("data=2") == doctest::Approx(step("tensor=2")).epsilon(0.01));
}

TEST_CASE("on CPU ranks the planner ranks ZeRO-1/2, sequence parallelism and each pipeline schedule as layouts of their own") {
  const HardwareProfile hw = cpu();
  const Plan plan = plan_training(gpt_bench(true), 2, hw);
  std::vector<std::string> names;
  for (const PlanEntry& e : plan.ranked) names.push_back(layout_summary(e.estimate.layout));
  for (const char* want : {"data=2", "data=2 zero=1", "data=2 zero=2", "fsdp=2", "tensor=2", "tensor=2 sequence-parallel",
                           "context=2"}) {
    CAPTURE(want);
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  }
  int pipelines = 0;
  for (const std::string& n : names) pipelines += n.starts_with("pipe=2");
  CHECK(pipelines == 4);  // 1f1b, gpipe, interleaved x2, zero-bubble
  // Off CPU ranks, the mesh alone: the book's planner (data, fsdp, tensor, pipe).
  CHECK(plan_training(gpt_bench(false), 2, hw).ranked.size() == 4);
}

TEST_CASE("what each choice changes: the optimizer's shard, the gradient collective, the norms, the bubble") {
  const HardwareProfile hw = cpu();
  const TrainConfig c = gpt_bench(true);
  const auto ops = [](const StepEstimate& e) {
    std::string s;
    for (const AxisComm& comm : e.comms) s += comm.axis + ":" + comm.what + ";";
    return s;
  };
  const StepEstimate dp = estimate_train_step(c, {.data = 2}, hw);
  const StepEstimate z1 = estimate_train_step(c, {.data = 2, .zero = 1}, hw);
  const StepEstimate z2 = estimate_train_step(c, {.data = 2, .zero = 2}, hw);
  CHECK(ops(dp) == "data:all_reduce(grads);");
  CHECK(ops(z1) == "data:all_reduce(grads);data:all_gather(params) after the step;");
  CHECK(ops(z2) == "data:reduce_scatter(grads);data:all_gather(params) after the step;");
  // AdamW's state over 2 ranks: half the optimizer pass and half its memory; ZeRO-2 halves
  // the gradients too.
  CHECK(z1.compute_seconds == doctest::Approx(dp.compute_seconds - optimizer_seconds(c, {.data = 2}, hw, 2)));
  CHECK(z1.memory.optimizer == doctest::Approx(dp.memory.optimizer / 2));
  CHECK(z2.memory.grads == doctest::Approx(dp.memory.grads / 2));
  CHECK(z1.memory.grads == doctest::Approx(dp.memory.grads));
  // The gather after the step waits: ZeRO-1's step is its compute plus it.
  CHECK(z1.step_seconds > z1.compute_seconds);
  // Sequence parallelism splits the norms and residuals: less element-wise work per rank.
  CHECK(elementwise_seconds(c, {.tensor = 2, .sequence_parallel = true}, hw) <
        elementwise_seconds(c, {.tensor = 2}, hw));
  // Bubbles: 1F1B and GPipe (p-1)/(m+p-1); interleaved over v; zero-bubble over 3m.
  using shardlab::parallel::ScheduleKind;
  const auto bubble = [&](ScheduleKind k, int v) {
    return estimate_train_step(c, {.pipe = 2, .microbatches = 4, .schedule = k, .virtual_stages = v}, hw).bubble_fraction;
  };
  CHECK(bubble(ScheduleKind::k1F1B, 1) == doctest::Approx(1.0 / 5));
  CHECK(bubble(ScheduleKind::kGPipe, 1) == doctest::Approx(1.0 / 5));
  CHECK(bubble(ScheduleKind::kInterleaved, 2) == doctest::Approx(1.0 / 9));
  CHECK(bubble(ScheduleKind::kZeroBubble, 1) == doctest::Approx(1.0 / 13));
  // GPipe keeps every microbatch's activations, 1F1B at most p.
  CHECK(estimate_train_step(c, {.pipe = 2, .microbatches = 4, .schedule = ScheduleKind::kGPipe}, hw).memory.activations >
        estimate_train_step(c, {.pipe = 2, .microbatches = 4}, hw).memory.activations);
  // What train_gpt refuses, the cost model refuses alike.
  CHECK(layout_problem(c, {.pipe = 2, .microbatches = 3, .schedule = ScheduleKind::kInterleaved, .virtual_stages = 2})
            .find("interleaved") != std::string::npos);
  CHECK(layout_problem(c, {.data = 2, .zero = 3}).find("zero=3") != std::string::npos);
}

TEST_CASE("a pipeline rank holds its stage's blocks, the first stage the embedding, the last the head") {
  const double tensor = 2, expert = 1;
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    CAPTURE(preset);
    const shardlab::nn::ModelConfig model = shardlab::nn::ModelConfig::preset(preset);
    const ParamCounts c = count_params(shape_of(model));
    const bool tied = c.unembedding == 0;
    // The whole model on one stage is what every rank of a layout without a pipe axis holds.
    CHECK(stage_shard_params(c, {}, tensor, expert) == doctest::Approx(model_shard_params(c, tensor, 1, expert)));
    // Two stages of half the blocks each: together the model once, and under tied
    // embeddings the last stage's copy of the token table besides.
    const double first = stage_shard_params(c, {.blocks = 0.5, .moe_blocks = 0.5, .first = true, .last = false}, tensor, expert);
    const double last = stage_shard_params(c, {.blocks = 0.5, .moe_blocks = 0.5, .first = false, .last = true}, tensor, expert);
    CHECK(first + last == doctest::Approx((c.total + (tied ? c.embedding : 0.0)) / tensor));
    CHECK(first - last == doctest::Approx((c.positions + (tied ? 0.0 : c.embedding - c.unembedding)) / tensor));
  }
  // The experts split over the expert axis too, in the share of MoE blocks the rank runs.
  const ParamCounts moe = count_params(shape_of(shardlab::nn::ModelConfig::preset("llama-moe-tiny")));
  REQUIRE(moe.experts > 0);
  const double all = stage_shard_params(moe, {.blocks = 0.5, .moe_blocks = 1, .first = false, .last = false}, 1, 2);
  const double none = stage_shard_params(moe, {.blocks = 0.5, .moe_blocks = 0, .first = false, .last = false}, 1, 2);
  CHECK(all - none == doctest::Approx(moe.experts / 2));
}

TEST_CASE("measured_compute (the planner's --probe) replaces the priced compute; communication is priced as before") {
  const HardwareProfile hw = cpu();
  TrainConfig c = gpt_bench(true);
  std::vector<std::string> asked;
  c.measured_compute = [&asked](const Layout& l) {
    asked.push_back(layout_summary(l));
    return l.tensor > 1 ? 0.120 : 0.100;
  };
  const StepEstimate tp = estimate_train_step(c, Layout{.tensor = 2}, hw);
  const StepEstimate priced = estimate_train_step(gpt_bench(true), Layout{.tensor = 2}, hw);
  CHECK(tp.compute_seconds == doctest::Approx(0.120));
  CHECK(tp.step_seconds - tp.compute_seconds == doctest::Approx(priced.step_seconds - priced.compute_seconds));
  CHECK(asked == std::vector<std::string>{"tensor=2"});
  // DP's reduction still hides under the measured backward when it is shorter.
  CHECK(estimate_train_step(c, Layout{.data = 2}, hw).step_seconds == doctest::Approx(0.100));
  // The ranking orders by it: here DP (100 ms) before TP (120 ms) before nothing else.
  const Plan plan = plan_training(c, 2, hw);
  REQUIRE(!plan.ranked.empty());
  CHECK(plan.ranked.front().estimate.layout.tensor == 1);
}

TEST_CASE("the optimizer's state shards over fsdp x context, else over data under ZeRO-1/2") {
  CHECK(optimizer_shards({.data = 2}) == 1);
  CHECK(optimizer_shards({.data = 2, .zero = 1}) == 2);
  CHECK(optimizer_shards({.data = 2, .zero = 2}) == 2);
  CHECK(optimizer_shards({.fsdp = 2}) == 2);
  CHECK(optimizer_shards({.data = 2, .fsdp = 2, .context = 2}) == 4);
  CHECK(optimizer_shards({.tensor = 2}) == 1);
}

TEST_CASE("model_config_of builds what shape_of describes, for every preset, and refuses a shape nn cannot build") {
  for (const std::string& name : shardlab::nn::ModelConfig::preset_names()) {
    CAPTURE(name);
    const shardlab::nn::ModelConfig preset = shardlab::nn::ModelConfig::preset(name);
    const auto built = model_config_of(shape_of(preset));
    REQUIRE(built.has_value());
    const TransformerShape want = shape_of(preset), got = shape_of(*built);
    CHECK(got.layers == want.layers);
    CHECK(got.d_model == want.d_model);
    CHECK(got.d_ff == want.d_ff);
    CHECK(got.heads == want.heads);
    CHECK(got.kv_heads == want.kv_heads);
    CHECK(got.vocab == want.vocab);
    CHECK(got.context == want.context);
    CHECK(got.gated_mlp == want.gated_mlp);
    CHECK(got.experts == want.experts);
    CHECK(got.top_k == want.top_k);
    CHECK(got.moe_every == want.moe_every);
    CHECK(count_params(got).total == count_params(want).total);
  }
  TransformerShape odd = model_preset("gpt-bench");
  odd.head_dim = 32;  // D / N is 64
  CHECK_FALSE(model_config_of(odd).has_value());
  TransformerShape swiglu_layer_norm = model_preset("gpt-bench");
  swiglu_layer_norm.gated_mlp = true;  // LLaMA's MLP with GPT's norms: neither architecture
  CHECK_FALSE(model_config_of(swiglu_layer_norm).has_value());
}
