// The cost model beyond the book's figures: hardware profiles and their file, general
// collective identities, training-step estimates around the book's crossovers, context
// parallelism, pods joined by DCN and a layout's conditions, the planner, training totals.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "framework/error.h"
#include "framework/nn/transformer.h"
#include "parallel/cost/hardware/calibrate.h"
#include "parallel/cost/model/transformer.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/network/multipod.h"
#include "parallel/cost/sharding/sharded_array.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/run_totals.h"
#include "parallel/cost/training/tpu_conditions.h"
#include "parallel/cost/training/train_step.h"

using namespace shardlab;
using namespace shardlab::cost;

TEST_CASE("hardware profiles: lookup, names, unknown names list the known ones") {
  CHECK(hardware_names().size() == 11);  // 10 chips of the book and local
  CHECK(hardware("TPU-V5P").name == "tpu-v5p");
  CHECK(hardware("h100").interconnect == Interconnect::kSwitched);
  CHECK_THROWS_WITH_AS(hardware("tpu-v9"), doctest::Contains("known profiles: tpu-v3, tpu-v4p"), UserError);
  CHECK(hardware("tpu-v5e").axis_wraps(16));
  CHECK_FALSE(hardware("tpu-v5e").axis_wraps(8));
  CHECK(hardware("tpu-v5p").axis_wraps(8));
}

TEST_CASE("profile file: save and load round-trip, per-axis links, clear errors") {
  HardwareProfile p = hardware("tpu-v5e");
  p.name = "local";
  p.axis_links["tensor"] = {2e9, 5e-6};
  const std::string path = "test_cost_model_tools.profile";
  save_profile(p, path);
  const HardwareProfile q = load_profile(path);
  CHECK(q.flops_bf16 == p.flops_bf16);
  CHECK(q.hbm_bandwidth == p.hbm_bandwidth);
  CHECK(q.ici.bandwidth == p.ici.bandwidth);
  CHECK(q.wraparound_granule == 16);
  CHECK(q.link("tensor").bandwidth == 2e9);
  CHECK(q.link("tensor").latency == 5e-6);
  CHECK(q.link("data").bandwidth == p.ici.bandwidth);  // no figure: the default link
  {
    std::ofstream bad(path);
    bad << "flops_fp32 = 1e11\nhbm_bandwith = 2e10\n";
  }
  CHECK_THROWS_WITH_AS(load_profile(path), doctest::Contains((path + ":2: unknown key 'hbm_bandwith'").c_str()), UserError);
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS(load_profile(path), doctest::Contains("shardlab-plan calibrate"), UserError);
}

TEST_CASE("profile file: one file holds every thread count; a new measurement keeps the others") {
  HardwareProfile p = hardware("tpu-v5e");
  p.name = "local";
  p.flops_fp32 = 1e11;
  p.flops_bf16 = 2e11;
  p.fingerprint = "host | cpu x2 | build 7 | 1 threads";
  p.other_threads[2] = {.flops_fp32 = 3e11, .flops_bf16 = 5e11, .flops_int8 = 3e11, .hbm_bandwidth = 7e10};
  const std::string path = "test_cost_model_tools_threads.profile";
  save_profile(p, path);
  HardwareProfile q = load_profile(path);
  REQUIRE(q.other_threads.size() == 1);
  CHECK(q.other_threads.at(2).flops_bf16 == 5e11);
  CHECK(fingerprint_machine(q.fingerprint) == "host | cpu x2 | build 7");

  CHECK(use_threads(q, 1));  // the fingerprint's own count: unchanged
  CHECK(q.flops_fp32 == 1e11);
  CHECK_FALSE(use_threads(q, 4));  // never measured: unchanged
  CHECK(q.flops_fp32 == 1e11);
  REQUIRE(use_threads(q, 2));  // swaps: 2 threads on top, 1 thread kept aside
  CHECK(q.flops_fp32 == 3e11);
  CHECK(q.flops_bf16 == 5e11);
  CHECK(q.hbm_bandwidth == 7e10);
  CHECK(fingerprint_threads(q.fingerprint) == 2);
  CHECK(q.other_threads.at(1).flops_fp32 == 1e11);
  CHECK(q.other_threads.count(2) == 0);

  // A fresh measurement with 4 threads on the same machine and build keeps 1 and 2 and the
  // links; one from another build keeps only the links.
  HardwareProfile fresh = p;
  fresh.other_threads.clear();
  fresh.flops_fp32 = 4e11;
  fresh.fingerprint = "host | cpu x2 | build 7 | 4 threads";
  p.axis_links["tensor"] = {2e9, 5e-6};
  save_profile(p, path);
  CHECK(keep_from_file(path, fresh) == "link.tensor, the figures for 1, 2 threads");
  CHECK(fresh.other_threads.at(1).flops_fp32 == 1e11);
  CHECK(fresh.other_threads.at(2).flops_fp32 == 3e11);
  CHECK(fresh.flops_fp32 == 4e11);
  HardwareProfile rebuilt = fresh;
  rebuilt.other_threads.clear();
  rebuilt.axis_links.clear();
  rebuilt.fingerprint = "host | cpu x2 | build 8 | 1 threads";
  CHECK(keep_from_file(path, rebuilt) == "link.tensor");
  CHECK(rebuilt.other_threads.empty());

  {
    std::ofstream bad(path);
    bad << "flops_fp32 = 1e11\nhbm_bandwidth = 1e10\nici.bandwidth = 1e10\nthreads.x.flops_fp32 = 1e11\n";
  }
  CHECK_THROWS_WITH_AS(load_profile(path), doctest::Contains("needs a thread count"), UserError);
  {
    std::ofstream bad(path);
    bad << "flops_fp32 = 1e11\nhbm_bandwidth = 1e10\nici.bandwidth = 1e10\nthreads.2.flops_fp32 = 1e11\n";
  }
  CHECK_THROWS_WITH_AS(load_profile(path), doctest::Contains("threads.2.flops_fp32 and .hbm_bandwidth must be positive"),
                       UserError);
  std::remove(path.c_str());
}

TEST_CASE("collectives: identities of the ring model") {
  const LinkSpec link{1e10, 1e-6};
  const double v = 64e6;
  for (int n : {2, 3, 4, 7, 8}) {
    CAPTURE(n);
    const auto ag = torus_collective(CollectiveOp::kAllGather, v, {{n, true}}, link);
    CHECK(torus_collective(CollectiveOp::kReduceScatter, v, {{n, true}}, link).seconds == ag.seconds);
    CHECK(torus_collective(CollectiveOp::kAllReduce, v, {{n, true}}, link).seconds == doctest::Approx(2 * ag.seconds).scale(0));
    // One direction of a ring: the textbook (n-1)/n V / W.
    CHECK(torus_collective(CollectiveOp::kAllGather, v, {{n, true}}, link, false).seconds ==
          doctest::Approx((n - 1) * v / (n * link.bandwidth)).scale(0));
    CHECK(collective_time(CollectiveOp::kAllGather, v, n, link, true, true) == ag.seconds);
    // A line is never faster than a ring.
    CHECK(torus_collective(CollectiveOp::kAllGather, v, {{n, false}}, link).seconds >= ag.seconds);
  }
  CHECK(torus_collective(CollectiveOp::kAllReduce, v, {{1, true}, {1, true}}, link).seconds == 0);
  CHECK_THROWS_AS(torus_collective(CollectiveOp::kAllGather, -1, {{4, true}}, link), UserError);
  CHECK_THROWS_WITH_AS(parallel::parse_collective_op("broadcast"), doctest::Contains("all_to_all"), UserError);
  CHECK(parallel::parse_collective_op("AllGather") == CollectiveOp::kAllGather);
}

TEST_CASE("GPU collectives over whole nodes: the fat tree's slowest level") {
  const HardwareProfile& h100 = hardware("h100");
  const double v = 1e9;
  const auto node = gpu_collective(CollectiveOp::kAllReduce, v, 8, h100);
  const auto two = gpu_collective(CollectiveOp::kAllReduce, v, 16, h100);
  CHECK(two.path == "nvlink+infiniband (fat tree, node-bound)");
  // Two nodes: NVLink's 7/8 V / 450 GB/s outlasts the leaf's 1/2 V / 400 GB/s.
  CHECK(two.seconds == doctest::Approx(2 * std::max(7.0 / 8 * v / 450e9, 0.5 * v / 400e9)).scale(0));
  CHECK(two.seconds == doctest::Approx(node.seconds).scale(0));
  // A whole SU: the leaf binds, 31/32 V / 400 GB/s.
  const auto su = gpu_collective(CollectiveOp::kAllReduce, v, 256, h100);
  CHECK(su.seconds == doctest::Approx(2 * 31.0 / 32 * v / 400e9).scale(0));
  CHECK(su.path == "nvlink+infiniband (fat tree, leaf-bound)");
  CHECK(su.hops == 2 * (7 + 31));
  // 12 GPUs no longer fail: the next test case prices them.
}

TEST_CASE("parameter count of GPT-2 small is the known 124,439,808") {
  CHECK(count_params(model_preset("gpt2-124m")).total == 124439808);
  CHECK_THROWS_WITH_AS(model_preset("gpt5"), doctest::Contains("llama3-70b"), UserError);
}

namespace {

TrainConfig small_model(double tokens) {
  TrainConfig c;
  c.model = model_preset("llama2-7b");
  c.model.context = 512;  // keep attention small so 6N dominates, as in the book's derivation
  c.batch_tokens = tokens;
  return c;
}

}  // namespace

TEST_CASE("training step: pure FSDP turns compute-bound near the book's C/W per chip") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  // 64 chips = 4x4x4: FSDP spans 3 axes, C/W = 850. Without remat a step is 6N FLOPs per
  // token against 3 collectives of the weights, so the crossover sits at C/W exactly.
  CHECK(dp_critical_batch(v5p, 3) == doctest::Approx(850).scale(0));
  const Layout fsdp{.fsdp = 64};
  const StepEstimate low = estimate_train_step(small_model(64 * 512), fsdp, v5p);     // 0.6 C/W
  const StepEstimate high = estimate_train_step(small_model(64 * 4096), fsdp, v5p);   // 4.8 C/W
  CHECK_FALSE(low.compute_bound);
  CHECK(low.bottleneck == "fsdp");
  CHECK(high.compute_bound);
  CHECK(high.step_seconds == high.compute_seconds);
}

TEST_CASE("training step: sharding state shrinks memory per chip; pipelines pay a bubble") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  const TrainConfig c = small_model(1 << 20);
  const StepEstimate dp = estimate_train_step(c, {.data = 8}, v5p);
  const StepEstimate fsdp = estimate_train_step(c, {.fsdp = 8}, v5p);
  CHECK(fsdp.memory.optimizer == doctest::Approx(dp.memory.optimizer / 8).scale(0));
  CHECK(fsdp.memory.total() < dp.memory.total());
  const StepEstimate pp = estimate_train_step(c, {.data = 2, .pipe = 4, .microbatches = 4}, v5p);
  CHECK(pp.bubble_fraction == doctest::Approx(3.0 / 7).scale(0));
  CHECK(pp.compute_seconds == doctest::Approx(dp.compute_seconds / (1 - 3.0 / 7)).scale(0));
  CHECK_THROWS_WITH_AS(estimate_train_step(c, {.tensor = 3}, v5p), doctest::Contains("tensor=3 does not divide"),
                       UserError);
}

TEST_CASE("planner: ranks fitting layouts by step time and says why the others lose") {
  TrainConfig c = small_model(1 << 20);
  const Plan plan = plan_training(c, 16, hardware("tpu-v5p"));
  REQUIRE(plan.feasible > 0);
  CHECK(plan.ranked.front().verdict == "best");
  for (size_t i = 1; i < plan.ranked.size(); ++i) {
    CHECK_FALSE(plan.ranked[i].verdict.empty());
    if (plan.ranked[i].estimate.fits)
      CHECK(plan.ranked[i].estimate.step_seconds >= plan.ranked[0].estimate.step_seconds);
  }
  const Plan tight = plan_training(c, 1, hardware("tpu-v5e"));  // 7B with Adam on one 16 GB chip
  CHECK(tight.feasible == 0);
  CHECK(tight.ranked.front().verdict.rfind("does not fit", 0) == 0);
}

TEST_CASE("planner: a slower layout's verdict gives its compute and the communication its step waits for") {
  // The total traffic alone does not say why a layout loses: ZeRO-1 sends what FSDP sends
  // but waits for its gathers. The verdict names the part of the step that does not hide.
  const Plan plan = plan_training(small_model(1 << 20), 16, hardware("tpu-v5p"));
  int slower = 0;
  for (const auto& entry : plan.ranked) {
    if (entry.verdict.rfind("slower by ", 0) != 0) continue;
    ++slower;
    const StepEstimate& e = entry.estimate;
    char parts[128];
    std::snprintf(parts, sizeof parts, "(compute %.3g vs %.3g ms; exposed communication %.3g of %.3g ms",
                  1e3 * e.compute_seconds, 1e3 * plan.ranked.front().estimate.compute_seconds,
                  1e3 * std::max(0.0, e.step_seconds - e.compute_seconds), 1e3 * e.comm_seconds);
    CAPTURE(entry.verdict);
    CHECK(entry.verdict.find(parts) != std::string::npos);
  }
  CHECK(slower > 0);
}

// Issue 13: the planner never aborts on a legal cluster size. Every chip count 1-256 and
// every 16th to 4096 (SHARDLAB_FULL_SWEEP=1: all of 1-4096), on every GPU and TPU
// profile: a ranked list, or no layout with the reasons each was skipped.
TEST_CASE("planner: every chip count 1-4096 on every profile gives layouts or reasons, never an error") {
  TrainConfig c;
  c.model = model_preset("llama2-13b");
  c.batch_tokens = 4 << 20;
  const bool full = std::getenv("SHARDLAB_FULL_SWEEP") != nullptr;
  for (const std::string& name : hardware_names()) {
    if (name == "local") continue;  // this machine's, measured: not a cluster
    const HardwareProfile& hw = hardware(name);
    for (int chips = 1; chips <= 4096; chips += (full || chips < 256) ? 1 : 16) {
      CAPTURE(name);
      CAPTURE(chips);
      Plan plan;
      REQUIRE_NOTHROW(plan = plan_training(c, chips, hw));
      CHECK((!plan.ranked.empty() || !plan.skipped.empty()));
      for (const auto& [why, count] : plan.skipped) CHECK_FALSE(why.empty());
    }
  }
}

TEST_CASE("GPU groups that do not fill whole nodes: gcd(gpus, node) per node, the rest across") {
  const HardwareProfile& h100 = hardware("h100");
  const double v = 1e9;
  // 12 GPUs on nodes of 8: 4 per node on NVLink, 3 nodes over the NICs.
  const CollectiveCost c = gpu_collective(CollectiveOp::kAllReduce, v, 12, h100);
  const double within = 3.0 / 4.0 * v / h100.ici.bandwidth, across = 2.0 / 3.0 * (v / 4) / h100.dcn.bandwidth;
  CHECK(c.bandwidth_seconds == doctest::Approx(2 * (within + across)).scale(0));
  CHECK(c.path == "nvlink+infiniband (hierarchical)");
  // Nodes shared with other groups past an SU (320 GPUs = 1.25 SUs) stay hierarchical.
  CHECK(gpu_collective(CollectiveOp::kAllGather, v, 320, h100).path == "nvlink+infiniband (hierarchical)");
  // The planner prices such layouts instead of failing: 192 H100s, a batch of 768 sequences.
  TrainConfig cfg;
  cfg.model = model_preset("llama2-13b");
  cfg.batch_tokens = 3 << 20;
  const Plan plan = plan_training(cfg, 192, h100);
  CHECK(plan.feasible > 0);
}

TEST_CASE("pods joined by DCN: where an axis group lies, and its hierarchical ICI + DCN price") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  CHECK(pods_spanned(8960, v5p) == 1);
  CHECK(pods_spanned(8961, v5p) == 2);
  CHECK(pods_spanned(4 * 8960, v5p) == 4);
  CHECK(pods_spanned(1 << 20, hardware("h100")) == 1);  // GPU nodes are the fat tree's, not pods
  // data=4 outside whole pods: all over DCN; tensor=4 and fsdp=2048 x tensor=4 inside one.
  CHECK(pod_split(4, 8960, v5p).in_pod == 1);
  CHECK(pod_split(4, 8960, v5p).across_pods == 4);
  CHECK(pod_split(2048, 4, v5p).across_pods == 1);
  // fsdp=8960 beside tensor=4 on 4 pods: 2240 in each pod, 4 pods apart.
  CHECK(pod_split(8960, 4, v5p).in_pod == 2240);
  CHECK(pod_split(8960, 4, v5p).across_pods == 4);
  const double v = 1e9;
  // Over DCN alone: a one-way ring of each chip's 6.25 GB/s NIC share.
  const CollectiveCost dcn = axis_collective(CollectiveOp::kAllReduce, v, 4, 8960, 4 * 8960, v5p);
  CHECK(dcn.path == "dcn");
  CHECK(dcn.bandwidth_seconds == doctest::Approx(2 * 3.0 / 4 * v / 6.25e9).scale(0));
  // Straddling pods: ICI over the pod's 2240 plus DCN over 4 pods on 1/2240 of the bytes.
  const CollectiveCost mixed = axis_collective(CollectiveOp::kAllGather, v, 8960, 4, 4 * 8960, v5p);
  const CollectiveCost within = axis_collective(CollectiveOp::kAllGather, v, 2240, 4, 8960, v5p);
  const CollectiveCost across = torus_collective(CollectiveOp::kAllGather, v / 2240, {{4, true}}, v5p.dcn, false);
  CHECK(mixed.path == "ici+dcn");
  CHECK(mixed.seconds == doctest::Approx(within.seconds + across.seconds).scale(0));
  CHECK(torus_axes_spanned(4, 8960, v5p) == 1);
  CHECK(torus_axes_spanned(2048, 8960, v5p) == 3);
  CHECK(torus_axes_spanned(4096, 1 << 20, hardware("h100")) == 1);
}

TEST_CASE("layout conditions: every group's M and term at once, as the estimate prices them") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  TrainConfig c;
  c.model = model_preset("llama3-70b");
  c.model.context = 4096;
  c.batch_tokens = 4 << 20;
  // The book's 2048 x 4 on 8192 chips: one domain, FSDP over 3 torus axes, TP over 1.
  const StepEstimate e = estimate_train_step(c, {.fsdp = 1024, .context = 2, .tensor = 4}, v5p);
  const LayoutConditions k = layout_conditions(c, e, v5p);
  CHECK(k.pods == 1);
  CHECK(k.dcn_ways == 1);
  CHECK(k.chips_per_domain == 8192);
  CHECK(k.fsdp == 2048);
  CHECK(k.fsdp_axes == torus_axes_spanned(2048, 8192, v5p));
  CHECK(k.tensor == 4);
  CHECK(k.tensor_axes == 1);
  CHECK(k.tokens_per_fsdp_member == doctest::Approx(512.0 * 4).scale(0));
  CHECK(k.fsdp_critical == doctest::Approx(2550.0 / k.fsdp_axes).scale(0));
  CHECK(k.fsdp_tp_critical == doctest::Approx(fsdp_tp_critical_batch(28672, v5p, k.fsdp_axes, 1)).scale(0));
  // The ring over the 2-way context axis: 2048 positions per chip against its 1275.
  CHECK(k.comm_to_compute == doctest::Approx(std::max({k.fsdp_critical / k.tokens_per_fsdp_member, 4 / k.tp_max_degree,
                                                       k.ring_critical / k.ring_tokens_per_shard})).scale(0));
  CHECK(k.compute_bound_by_book);
  CHECK(k.dcn_crossing_seconds == 0);
  // Each microbatch gathers the weights again: half the tokens per gather.
  const StepEstimate halves = estimate_train_step(c, {.fsdp = 512, .context = 2, .tensor = 4, .microbatches = 2}, v5p);
  CHECK(layout_conditions(c, halves, v5p).tokens_per_fsdp_member ==
        doctest::Approx(layout_conditions(c, estimate_train_step(c, {.fsdp = 512, .context = 2, .tensor = 4}, v5p), v5p)
                            .tokens_per_fsdp_member / 2).scale(0));
  // Two pods of DP over DCN with too small a batch per pod: the book's DCN term fails.
  c.batch_tokens = 16.0 * 4096;  // 32,768 tokens per pod < C/W_dcn = 73,440
  const StepEstimate tiny = estimate_train_step(c, {.data = 2, .fsdp = 8, .context = 35, .tensor = 32}, v5p);
  const LayoutConditions kt = layout_conditions(c, tiny, v5p);
  CHECK(kt.pods == 2);
  CHECK(kt.dcn_ways == 2);
  CHECK(kt.tokens_per_pod == doctest::Approx(8.0 * 4096).scale(0));
  CHECK_FALSE(kt.dcn_hidden);
  CHECK_FALSE(kt.compute_bound_by_book);
  CHECK(kt.dcn_crossing_seconds > 0);
}

// Issue 13: several pods, and chip counts past a pod that fill no whole pods, plan too.
TEST_CASE("planner: 2-4 pods and counts past one pod on every TPU profile give layouts or reasons") {
  TrainConfig c;
  c.model = model_preset("llama2-13b");
  c.batch_tokens = 4 << 20;
  for (const std::string& name : hardware_names()) {
    const HardwareProfile& hw = hardware(name);
    if (name == "local" || hw.interconnect == Interconnect::kSwitched) continue;
    for (int chips : {2 * hw.node_size, 3 * hw.node_size, 4 * hw.node_size, hw.node_size + 1, 3 * hw.node_size / 2}) {
      CAPTURE(name);
      CAPTURE(chips);
      Plan plan;
      REQUIRE_NOTHROW(plan = plan_training(c, chips, hw));
      CHECK((!plan.ranked.empty() || !plan.skipped.empty()));
      if (!plan.ranked.empty())
        CHECK(layout_conditions(c, plan.ranked.front().estimate, hw).pods == pods_spanned(chips, hw));
    }
  }
}

TEST_CASE("context parallelism: general behaviour") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  TrainConfig c;
  c.model = model_preset("llama2-13b");
  c.batch_tokens = 64.0 * 4096;
  // Memory and state: the context axis divides activations and, with fsdp, the state.
  const StepEstimate flat = estimate_train_step(c, {.fsdp = 64}, v5p);
  const StepEstimate split = estimate_train_step(c, {.fsdp = 32, .context = 2}, v5p);
  CHECK(split.memory.optimizer == doctest::Approx(flat.memory.optimizer).scale(0));
  CHECK(split.memory.activations == doctest::Approx(flat.memory.activations).scale(0));
  CHECK(split.tokens_per_chip == doctest::Approx(flat.tokens_per_chip).scale(0));
  const StepEstimate halved = estimate_train_step(c, {.fsdp = 64, .context = 2}, v5p);
  CHECK(halved.memory.activations == doctest::Approx(flat.memory.activations / 2).scale(0));
  CHECK(halved.tokens_per_chip == doctest::Approx(2048).scale(0));
  // An uneven split pads the last shard and computes the padding.
  const StepEstimate uneven = estimate_train_step(c, {.fsdp = 64, .context = 3}, v5p);
  CHECK(uneven.tokens_per_chip == doctest::Approx(1366).scale(0));
  CHECK(uneven.padding_fraction == doctest::Approx(1 - 4096.0 / 4098).scale(0));
  CHECK(layout_problem(c, {.context = 8192}).find("exceeds the sequence length T=4096") != std::string::npos);
  // Where the batch covers the chips the planner adds no context axis; train_gpt's own
  // autograd (shardlab_activations) trains one (test_cost_context_parallel.cpp).
  for (const PlanEntry& e : plan_training(c, 64, v5p).ranked) CHECK(e.estimate.layout.context == 1);
  CHECK_FALSE(plan_training(c, 128, v5p).ranked.empty());
  c.shardlab_activations = true;
  CHECK(layout_problem(c, {.fsdp = 64, .context = 2}).empty());
}

TEST_CASE("training totals: general behaviour and errors") {
  const HardwareProfile& h100 = hardware("h100");
  RunSpec run{.params = 7e9, .tokens = 2e12, .extra_flops_per_token = 1e9, .chips = 64, .mfu = 0.5};
  const RunTotals t = run_totals(run, h100);
  CHECK(t.flops_per_token == 6 * 7e9 + 1e9);
  CHECK(t.train_flops == doctest::Approx(43e9 * 2e12).scale(0));
  CHECK(t.seconds == doctest::Approx(43e9 * 2e12 / (64 * 9.9e14 * 0.5)).scale(0));
  CHECK(t.seconds == doctest::Approx(2 * run_totals({.params = 7e9, .tokens = 2e12, .extra_flops_per_token = 1e9,
                                                     .chips = 128, .mfu = 0.5},
                                                    h100)
                                             .seconds).scale(0));
  run.dtype = DType::kFp8;  // H100's fp8 peak doubles bf16's
  CHECK(run_totals(run, h100).seconds == doctest::Approx(t.seconds / 2).scale(0));
  run.state = state_preset("mixed-adam");
  CHECK(run_totals(run, h100).state_bytes == 16 * 7e9);
  CHECK(run_totals(run, h100).min_chips == 2);  // 112 GB over 80 GB chips
  CHECK_THROWS_WITH_AS(state_preset("adafactor"), doctest::Contains("bf16-adam, mixed-adam"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(run_totals({.params = 1, .tokens = 1, .mfu = 1.5}, h100), doctest::Contains("(0, 1]"),
                       shardlab::UserError);
  CHECK_THROWS_AS(run_totals({.params = 0, .tokens = 1}, h100), shardlab::UserError);
}

TEST_CASE("predicted train step for train_gpt is FLOPs over peak") {
  HardwareProfile local = hardware("tpu-v5e");
  local.flops_fp32 = 1e11;
  const TransformerShape s = model_preset("gpt2-124m");
  CHECK(predicted_train_step_seconds(s, 8192, local) == doctest::Approx(train_flops_per_token(s) * 8192 / 1e11).scale(0));
}

TEST_CASE("MoE parameter counts match the model train_gpt builds, and the E/k batch condition") {
  for (const char* preset : {"gpt-moe-tiny", "llama-moe-tiny", "llama-moe-small"}) {
    for (int64_t every : {1, 2}) {
      nn::ModelConfig c = nn::ModelConfig::preset(preset);
      c.moe_every = every;
      INFO(std::string(preset) << ", MoE every " << every << " layers");
      nn::DeferParameters defer;  // shapes only: costs no memory
      nn::Transformer model(c);
      const ParamCounts p = count_params(shape_of(c));
      CHECK(p.total == static_cast<double>(model.num_parameters()));
      double experts = 0;  // the stacked expert weights the model holds
      for (const auto& block : model.blocks) {
        if (!block->moe) continue;
        for (const auto& [name, t] : block->moe->named_parameters()) {
          if (name.rfind("router.", 0) != 0) experts += static_cast<double>(t.numel());
        }
      }
      CHECK(p.experts == experts);
      CHECK(p.active == doctest::Approx(p.total - experts * (c.experts - c.top_k) / c.experts).scale(0));
    }
  }
  // Mixtral 8x7B: 46.7B parameters, 12.9B active per token (2 of 8 experts).
  const ParamCounts mixtral = count_params(model_preset("mixtral-8x7b"));
  CHECK(mixtral.total == doctest::Approx(46.7e9).epsilon(0.01).scale(0));
  CHECK(mixtral.active == doctest::Approx(12.9e9).epsilon(0.01).scale(0));
  // Each expert sees k/E of the tokens: a critical batch of 850 per chip becomes 3400 at E=8, k=2.
  CHECK(moe_critical_batch(850, 8, 2) == doctest::Approx(3400).scale(0));
  CHECK(moe_critical_batch(850, 0, 1) == doctest::Approx(850).scale(0));  // dense: unchanged
}

TEST_CASE("sharded arrays on a named mesh: local shape, bytes per device, replication (the book's chapter 3)") {
  // The notation explorer's A[I_X, J_Y]: bf16[1024, 2048] on a 2 x 2 mesh.
  const ShardedArray a = shard_array({1024, 2048}, "X,Y", parse_named_mesh("X=2,Y=2"), 2);
  CHECK(a.local == std::vector<int64_t>{512, 1024});
  CHECK(a.bytes_per_device == 512.0 * 1024 * 2);   // 1.05 MB
  CHECK(a.total_bytes == 4.0 * 512 * 1024 * 2);    // 4.19 MB
  CHECK(a.replication == 1);
  CHECK(a.describe() == "A[I_X, J_Y]");
  // Chapter 3, question 1: int8[128, 2048] as A[I_XY, J] on {X: 2, Y: 8, Z: 2}: each device
  // keeps 128 / 16 = 8 rows (16 KiB), every block twice (over Z): 512 KiB on the mesh.
  const ShardedArray q = shard_array({128, 2048}, "XY,", parse_named_mesh("X=2,Y=8,Z=2"), 1);
  CHECK(q.local == std::vector<int64_t>{8, 2048});
  CHECK(q.bytes_per_device == 16384);
  CHECK(q.replication == 2);
  CHECK(q.total_bytes == 524288);
  CHECK(q.describe() == "A[I_XY, J]");
  CHECK(shard_array({128, 2048}, "X+Y,-", parse_named_mesh("X=2,Y=8,Z=2"), 1).local == q.local);
  // A dimension that does not divide is padded to ceil blocks.
  CHECK(shard_array({10}, "X", parse_named_mesh("X=4"), 4).local == std::vector<int64_t>{3});
  CHECK(shard_array({10}, "X", parse_named_mesh("X=4"), 4).padded);
  // Errors name what is wrong.
  CHECK_THROWS_WITH_AS(shard_array({8, 8}, "X,X", parse_named_mesh("X=2"), 1), doctest::Contains("uses mesh axis X twice"),
                       UserError);
  CHECK_THROWS_WITH_AS(shard_array({8, 8}, "W,", parse_named_mesh("X=2"), 1), doctest::Contains("'W' is not in the mesh"),
                       UserError);
  CHECK_THROWS_WITH_AS(shard_array({8, 8}, "X", parse_named_mesh("X=2"), 1), doctest::Contains("has 1 entries"), UserError);
  CHECK_THROWS_WITH_AS(parse_named_mesh("X=0"), doctest::Contains("sizes must be at least 1"), UserError);
}
