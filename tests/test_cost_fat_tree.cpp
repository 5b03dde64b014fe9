// The GPU chapter's network figures (gpus.md of jax-ml/scaling-book: nodes, the DGX
// SuperPod fat tree, cross-node collectives, SHARP) behind `shardlab-plan network`
// (parallel/cost/network/fat_tree.h), as tables (tests/book_figure.h), then general behaviour.
#include <doctest/doctest.h>

#include "framework/error.h"
#include "parallel/cost/network/fat_tree.h"
#include "parallel/cost/training/train_step.h"
#include "tests/book_figure.h"

using namespace shardlab::cost;
using shardlab::test::check;
using shardlab::test::kBook;
using shardlab::test::kExact;

namespace {

constexpr double kUs = 1e-6;

double seconds(const FatTree& t, CollectiveOp op, double bytes, int gpus, CollectiveOptions o = {}) {
  return fat_tree_collective(t, op, bytes, gpus, o).seconds;
}

}  // namespace

TEST_CASE("switches per level of the SuperPod, and of a larger one (gpus.md)") {
  const FatTree pod = fat_tree(hardware("h100"));
  const FatTree twice = fat_tree(hardware("h100"), 8);
  REQUIRE(pod.levels.size() == 3);
  const char* superpod = "gpus.md, Beyond the node level (SuperPod)";
  const char* q2 = "gpus.md, Quiz 3 Q2 [Scaling to a larger DGX pod]";
  check({
      {superpod, "512 node-level NVSwitches (4 per node)", static_cast<double>(pod.levels[0].switches), 512, kExact},
      {superpod, "32 leaf IB switches (8 per SU of 256 GPUs)", static_cast<double>(pod.levels[1].switches), 32, kExact},
      {superpod, "16 spine IB switches", static_cast<double>(pod.levels[2].switches), 16, kExact},
      {superpod, "512 + 32 + 16 = 560 switches", static_cast<double>(pod.switches()), 560, kExact},
      {q2, "2048 GPUs: 8 SUs with 32 spine switches", static_cast<double>(twice.levels[2].switches), 32, kExact},
  });
  // gpus.md's node table: NVSwitches per node by generation.
  CHECK(fat_tree(hardware("a100"), 1).levels[0].switches == 32 * 6);
  CHECK(fat_tree(hardware("b200"), 1).levels[0].switches == 32 * 2);
  CHECK(fat_tree(hardware("gb200-nvl72"), 1).levels[0].switches == 32 * 18);
  // A spine oversubscribed 2:1 needs half the switches.
  CHECK(fat_tree(hardware("h100"), 4, 2).levels[2].switches == 8);
}

TEST_CASE("the H100 SuperPod's levels and their collective bandwidth (gpus.md)") {
  const FatTree h100 = fat_tree(hardware("h100"));
  REQUIRE(h100.levels.size() == 3);
  const FatTreeLevel &node = h100.levels[0], &leaf = h100.levels[1], &spine = h100.levels[2];
  const char* levels = "gpus.md, Beyond the node level (level table)";
  const char* precise = "gpus.md, Cross-node collectives (precise derivation)";
  const GpuCollective pod = fat_tree_collective(h100, CollectiveOp::kAllGather, 1e9, 1024);
  check({
      {levels, "node: 8 GPUs, 450 GB/s each", node.link_bandwidth, 450e9, kExact},
      {levels, "leaf (SU): 256 GPUs", static_cast<double>(leaf.gpus()), 256, 1e-12},
      {levels, "leaf: 400 GB/s node egress (8 x 400 Gbps)", leaf.link_bandwidth, 400e9, kExact},
      {levels, "leaf: 50 GB/s per GPU", leaf.per_gpu(), 50e9, kExact},
      {levels, "spine: 1024 GPUs", static_cast<double>(spine.gpus()), 1024, 1e-12},
      {levels, "spine: 12.8 TB/s per SU", spine.link_bandwidth, 12.8e12, kExact},
      {precise, "node AG bandwidth 450e9 x 8 / 7 = 514 GB/s", node.collective_bandwidth(), 514e9, kExact},
      {precise, "leaf 400e9 x 32 / 31 = 413 GB/s", leaf.collective_bandwidth(), 413e9, kExact},
      {precise, "spine 12.8e12 x 4 / 3 = 17.1 TB/s", spine.collective_bandwidth(), 17.1e12, 0.01},
      {precise, "the SuperPod's AG bandwidth, the least: 413 GB/s", pod.bandwidth, 413e9, kExact},
      {"gpus.md, Quiz 2 Q1-Q2", "an H100 node's 8 x 450 GB/s (bisection both ways, 3.6 TB/s)",
       fat_tree_collective(h100, CollectiveOp::kAllGather, 1e9, 8).bisection_bandwidth, 3.6e12, kExact},
      {"gpus.md, Node egress table", "B200: 900 GB/s per GPU", fat_tree(hardware("b200")).levels[0].link_bandwidth,
       900e9, kExact},
      {"gpus.md, Node egress table", "B200: 400 GB/s per node", fat_tree(hardware("b200")).node_egress, 400e9, kExact},
  });
  CHECK(pod.bound_level == "leaf");
}

TEST_CASE("collectives in a node, across nodes, with an inner axis and with SHARP (gpus.md)") {
  const FatTree h100 = fat_tree(hardware("h100"));
  const double array = 4096.0 * 65536 * 2;       // Quiz 2 Q3: bf16[4096, 65536]
  const double pop1 = 2.0 * 1024 * 16384;        // Pop Quiz 1: bf16[1024, 16384]
  const double pop3 = 2.0 * 8192 * 32768;        // Pop Quiz 3: bf16[8192, 32768]
  const double ar = 1e9;
  const char* pop3_where = "gpus.md, Pop Quiz 3 [Sharding along 2 axes]";
  check({
      {"gpus.md, Quiz 2 Q3", "AllGather of 512 MB in a node: 536e6 x 7 / 3.6e12", seconds(h100, CollectiveOp::kAllGather, array, 8),
       1.04e-3, 0.01},
      {"gpus.md, Pop Quiz 1 [AllGather time]", "bf16[1024, 16384] in a node, precisely 65 us",
       seconds(h100, CollectiveOp::kAllGather, pop1, 8), 65 * kUs, 0.01},
      {pop3_where, "Y <= 8 over one SU: 2 D F x 31 / (32 x 400e9)", seconds(h100, CollectiveOp::kAllGather, pop3, 256),
       pop3 * 31 / (32 * 400e9), kExact},
      {pop3_where, "Y = 8 does not help (the node level only)",
       seconds(h100, CollectiveOp::kAllGather, pop3, 256, {.inner = 8}), pop3 * 31 / (32 * 400e9), kExact},
      // The book's 2 D F / (Y 50 GB/s) drops the leaf's (32 - 1) / 32.
      {pop3_where, "Y = 16: 2 D F / (Y x 50 GB/s)", seconds(h100, CollectiveOp::kAllGather, pop3, 256, {.inner = 16}),
       pop3 / (16 * 50e9), kBook},
      {"gpus.md, In network reductions", "SHARP AllReduce in a node: bytes / W",
       seconds(h100, CollectiveOp::kAllReduce, ar, 8, {.sharp = true}), ar / 450e9, kExact},
      {"gpus.md, In network reductions", "... the predicted 75% gain over 2 (N - 1) / N bytes / W",
       seconds(h100, CollectiveOp::kAllReduce, ar, 8) / seconds(h100, CollectiveOp::kAllReduce, ar, 8, {.sharp = true}),
       1.75, kExact},
      {"gpus.md, AllToAlls", "in a node: B (N - 1) / (W N^2)", seconds(h100, CollectiveOp::kAllToAll, ar, 8),
       ar * 7 / (450e9 * 64), kExact},
      // The book: "B / (2 x 400e9) when spanning 2 nodes", its B / (M W) approximation of
      // B (M - 1) / (M^2 W), which at M = 2 is B / (4 W): half of what it prints.
      {"gpus.md, Other collectives", "all_to_all over 2 nodes: B (M - 1) / (M^2 W_node) (book: B / (2 W_node))",
       seconds(h100, CollectiveOp::kAllToAll, ar, 16), ar / (4 * 400e9), kExact},
  });
  // The inner axis cuts the scale-out time in proportion to the nodes it spans.
  CHECK(seconds(h100, CollectiveOp::kAllGather, pop3, 256, {.inner = 32}) ==
        doctest::Approx(seconds(h100, CollectiveOp::kAllGather, pop3, 256, {.inner = 16}) / 2).scale(0));
  // The spine never binds a full-bisection tree; oversubscribed 8:1 it does.
  CHECK(fat_tree_collective(h100, CollectiveOp::kAllGather, 1e9, 1024).bound_level == "leaf");
  CHECK(fat_tree_collective(fat_tree(hardware("h100"), 4, 64), CollectiveOp::kAllGather, 1e9, 1024).bound_level ==
        "spine");
}

// Quiz 4 (collectives on the fat tree): the bytes through each switch level, SHARP in one
// node and past it, SHARP at the spine, and the 2-node AllGather the node level binds.
TEST_CASE("Quiz 4: collectives through the switches (gpus.md)") {
  const FatTree h100 = fat_tree(hardware("h100"));
  const double b = 1e9, m = 32, n = 8;
  const double pop3 = 2.0 * 8192 * 32768;  // bf16[D, F] with Pop Quiz 3's D and F
  const GpuCollective su = fat_tree_collective(h100, CollectiveOp::kAllGather, b, 256);
  const LevelTime &node = su.levels[0], &leaf = su.levels[1];
  const GpuCollective sharp = fat_tree_collective(h100, CollectiveOp::kAllReduce, b, 8, {.sharp = true});
  const GpuCollective q3 = fat_tree_collective(h100, CollectiveOp::kAllReduce, pop3, 8, {.inner = 4, .sharp = true});
  const GpuCollective q3_nodes =
      fat_tree_collective(h100, CollectiveOp::kAllReduce, pop3, 16, {.inner = 4, .sharp = true});
  // Appendix B: the spine's 16 switches x 1.6 TB/s = 25.6 TB/s for 4 SUs, half the 12.8 TB/s
  // per SU of its links: oversubscription 2.
  const GpuCollective q4 = fat_tree_collective(fat_tree(hardware("h100"), 4, 2), CollectiveOp::kAllReduce, pop3, 1024,
                                               {.inner = 256, .sharp = true});
  const GpuCollective two = fat_tree_collective(h100, CollectiveOp::kAllGather, b, 16);
  check({
      {"gpus.md, Quiz 4 Q1", "SU AllGather: the node switch takes in B", node.switch_in, b, kExact},
      {"gpus.md, Quiz 4 Q1", "... and sends out B N", node.switch_out, b * n, kExact},
      {"gpus.md, Quiz 4 Q1", "... B N / (N x 450e9) = B / 450e9", node.switch_out / (n * node.link_bandwidth),
       b / 450e9, kExact},
      {"gpus.md, Quiz 4 Q1", "the top (leaf) switch takes in B", leaf.switch_in, b, kExact},
      {"gpus.md, Quiz 4 Q1", "... and sends out B (M - 1)", leaf.switch_out, b * (m - 1), kExact},
      {"gpus.md, Quiz 4 Q1", "... B (M - 1) / (M x 400e9), the AllGather's time", su.seconds,
       b * (m - 1) / (m * 400e9), kExact},
      {"gpus.md, Quiz 4 Q2", "SHARP AllReduce in a node: B N into the switch", sharp.levels[0].switch_in, b * n, kExact},
      {"gpus.md, Quiz 4 Q2", "... and B N out", sharp.levels[0].switch_out, b * n, kExact},
      {"gpus.md, Quiz 4 Q2", "... B / W_egress", sharp.seconds, b / 450e9, kExact},
      {"gpus.md, Quiz 4 Q3", "SHARP AllReduce of bf16[D, F_Y] in a node, Y = 4: 2 D F / (Y W_link)", q3.seconds,
       pop3 / (4 * 450e9), kExact},
      {"gpus.md, Quiz 4 Q3", "... N B / Y through the switch", q3.levels[0].switch_out, n * pop3 / 4, kExact},
      {"gpus.md, Quiz 4 Q3", "past one node each node egresses all B: B / 400e9", q3_nodes.seconds, pop3 / 400e9,
       kExact},
      {"gpus.md, Quiz 4 Q4", "Y = 256, SHARP at the spine: 2 D F / 6.4e12", q4.seconds, pop3 / 6.4e12, kExact},
      {"gpus.md, Quiz 4 Q5", "AllGather over 2 nodes, node level: B 7 / (8 x 450e9) = B / 514e9",
       two.levels[0].seconds, b / 514e9, kExact},
      {"gpus.md, Quiz 4 Q5", "... the leaf: B / (2 x 400e9) = B / 800e9", two.levels[1].seconds, b / 800e9, kExact},
      {"gpus.md, Quiz 4 Q5", "... so the node level binds: B / 514e9", two.seconds, b / 514e9, kExact},
  });
  CHECK(q3_nodes.bound_level == "leaf");
  CHECK(q4.bound_level == "spine");
  CHECK(two.bound_level == "node");
}

// The same worked examples as `shardlab-plan collective` (collective_cost) and the planner
// (axis_collective) price them once a group spans nodes: the fat tree, not the per-NIC
// hierarchical sum; inside a node nothing changes.
TEST_CASE("collective and train price groups spanning nodes by the fat tree (gpus.md)") {
  const HardwareProfile& h100 = hardware("h100");
  const double array = 4096.0 * 65536 * 2;  // Quiz 2 Q3: bf16[4096, 65536]
  const double pop3 = 2.0 * 8192 * 32768;   // Pop Quiz 3: bf16[8192, 32768]
  const char* pop3_where = "gpus.md, Pop Quiz 3 [Sharding along 2 axes]";
  auto axis = [&](CollectiveOp op, double bytes, int size, int inner, int chips) {
    return axis_collective(op, bytes, size, inner, chips, h100).seconds;
  };
  check({
      {"gpus.md, Quiz 2 Q3", "AllGather of 512 MB in a node (collective)",
       collective_cost(CollectiveOp::kAllGather, array, {8}, h100).seconds, 1.04e-3, 0.01},
      {"gpus.md, Cross-node collectives", "AllGather over one SU at 413 GB/s (collective)",
       collective_cost(CollectiveOp::kAllGather, 1e9, {256}, h100).seconds, 1e9 / 413e9, kExact},
      {"gpus.md, Cross-node collectives", "... and over the 1024-GPU SuperPod, still leaf-bound (collective)",
       collective_cost(CollectiveOp::kAllGather, 1e9, {4, 256}, h100).seconds, 1e9 / 413e9, kExact},
      {pop3_where, "FSDP over 256 GPUs, no inner axis (train's fsdp axis)",
       axis(CollectiveOp::kAllGather, pop3, 256, 1, 256), pop3 * 31 / (32 * 400e9), kExact},
      // The planner's V is one axis' array: the fsdp axis of 16 outside a 16-way tensor axis
      // gathers 1/16 of the whole array, and the book's 2 D F / (Y 50 GB/s) follows.
      {pop3_where, "Y = 16 inside a 16-way FSDP axis: 2 D F / (Y x 50 GB/s) (train)",
       axis(CollectiveOp::kAllGather, pop3 / 16, 16, 16, 256), pop3 / (16 * 50e9), kBook},
      {pop3_where, "Y = 8 does not help (train)", axis(CollectiveOp::kAllGather, pop3 / 8, 32, 8, 256),
       pop3 * 31 / (32 * 400e9), kExact},
  });
  // Inside a node the model is unchanged: (N - 1) / N V / W.
  CHECK(axis(CollectiveOp::kAllGather, 1e9, 4, 2, 64) == doctest::Approx(3.0 / 4 * 1e9 / 450e9).scale(0));
  CHECK(axis_collective(CollectiveOp::kAllGather, 1e9, 16, 16, 256, h100).path ==
        "nvlink+infiniband (fat tree, leaf-bound)");
  CHECK_FALSE(spans_whole_nodes(CollectiveOp::kAllGather, 12, 1, h100));
  CHECK_FALSE(spans_whole_nodes(CollectiveOp::kAllToAll, 4, 8, h100));
  CHECK_THROWS_WITH_AS(fat_tree_axis_collective(CollectiveOp::kAllGather, 1e9, 12, 1, h100),
                       doctest::Contains("does not span whole nodes of 8"), shardlab::UserError);
}

// GB200 NVL72 (gpus.md, "GB200 NVL72"): 72 B200s share one NVLink domain whose egress is
// 72 x 400 Gbps; an all_gather over the domain stays on NVLink, one over two domains too.
TEST_CASE("GB200 NVL72: a 72-GPU NVLink domain and 3.6 TB/s node egress (gpus.md)") {
  const HardwareProfile& nvl72 = hardware("gb200-nvl72");
  const FatTree t = fat_tree(nvl72);
  const char* where = "gpus.md, Node egress table (GB200 NVL72)";
  check({
      {where, "GPUs per NVLink domain", static_cast<double>(nvl72.node_size), 72, 1e-12},
      {where, "NVLink per GPU, 900 GB/s", t.levels[0].link_bandwidth, 900e9, kExact},
      {where, "node egress 72 x 50 GB/s = 3.6 TB/s", t.node_egress, 3.6e12, kExact},
      {where, "node AG bandwidth 72 x 900e9 / 71", t.levels[0].collective_bandwidth(), 72 * 900e9 / 71, kExact},
      {where, "AllGather of 1 GB over one NVL72: 71/72 V / 900 GB/s",
       collective_cost(CollectiveOp::kAllGather, 1e9, {72}, nvl72).seconds, 71.0 / 72 * 1e9 / 900e9, kExact},
      {where, "... over two NVL72s, still NVLink-bound (the leaf: 1/2 V / 3.6 TB/s)",
       collective_cost(CollectiveOp::kAllGather, 1e9, {144}, nvl72).seconds, 71.0 / 72 * 1e9 / 900e9, kExact},
  });
}

TEST_CASE("fat tree: general behaviour and errors") {
  const FatTree h100 = fat_tree(hardware("h100"));
  CHECK(seconds(h100, CollectiveOp::kAllGather, 1e9, 1) == 0);
  CHECK(fat_tree_collective(h100, CollectiveOp::kAllGather, 1e9, 4).levels.size() == 1);  // part of a node
  CHECK(fat_tree_collective(h100, CollectiveOp::kAllReduce, 1e9, 8).levels[0].switch_out == 0);  // no SHARP: none
  CHECK(fat_tree(hardware("h100"), 8).levels.back().gpus() == 2048);  // the book's 2048: 8 SUs
  CHECK(fat_tree(hardware("h100"), 1).levels.size() == 2);            // one SU: no spine
  CHECK_THROWS_WITH_AS(fat_tree(hardware("tpu-v5e")), doctest::Contains("is a torus"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(fat_tree_collective(h100, CollectiveOp::kAllGather, 1e9, 12),
                       doctest::Contains("not whole leaf children of 8 GPUs"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(fat_tree_collective(h100, CollectiveOp::kAllGather, 1e9, 2048),
                       doctest::Contains("does not fit the tree's 1024"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(fat_tree_collective(h100, CollectiveOp::kAllGather, 1e9, 256, {.inner = 3}),
                       doctest::Contains("inner axis 3 does not divide"), shardlab::UserError);
  CHECK_THROWS_WITH_AS(fat_tree_collective(h100, CollectiveOp::kSend, 1e9, 16), doctest::Contains("prices all_gather"),
                       shardlab::UserError);
  CHECK_THROWS_WITH_AS(fat_tree(hardware("h100"), 4, 0.5), doctest::Contains("oversubscription 0.5"),
                       shardlab::UserError);
}
