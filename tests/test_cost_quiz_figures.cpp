// The book's quiz figures on one chip's vector units, single-chip matmuls, sharded arrays
// and einsums, the bytes a ring's links carry, a ragged AllToAll, and an MoE's decode batch, as tables
// (tests/book_figure.h): parallel/cost/roofline/ops.h (`shardlab-plan hw --clock`,
// `--vector-flops`, `roofline --einsum ... --shard`), parallel/cost/sharding/sharded_array.h
// (`shardlab-plan array --hw`) and parallel/cost/network/collective.h
// (`collective --unidirectional`, `--nonzero`).
#include <doctest/doctest.h>

#include "framework/error.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/network/collective.h"
#include "parallel/cost/roofline/ops.h"
#include "parallel/cost/roofline/roofline.h"
#include "parallel/cost/sharding/sharded_array.h"
#include "parallel/cost/training/axis_conditions.h"
#include "tests/book_figure.h"

using namespace shardlab::cost;
using shardlab::test::check;
using shardlab::test::kBook;
using shardlab::test::kExact;

TEST_CASE("vector units: FLOP/s at a clock, and the clock behind quoted FLOP/s (tpus.md, gpus.md)") {
  HardwareProfile v5p = hardware("tpu-v5p");
  v5p.facts.clock_hz = 1.75e9;  // the Pop Quiz's "about 1.75GHz" (the profile has no clock)
  const HardwareProfile& h100 = hardware("h100");
  const HardwareProfile& b200 = hardware("b200");
  check({
      {"tpus.md, Pop Quiz [Calculating VPU throughput]", "8 x 128 x 4 x 2 x 1.75e9 = 1.4e13 FLOP/s", vector_flops(v5p),
       1.4e13, kBook},
      {"gpus.md, Quiz 1 Q2 [Vector FLOPs calculation]", "H100 at the 1.98 GHz boost: 33.5 TFLOP/s", vector_flops(h100),
       33.5e12, 0.01},
      {"gpus.md, Quiz 1 Q6 [Calculating B200 clock frequency]", "80e12 / (18944 x 2) = 2.1 GHz",
       clock_for_vector_flops(b200, 80e12, 2), 2.1e9, kBook},
  });
  CHECK(vector_flops(hardware("tpu-v5p")) == 0);  // no clock in the profile: unknown
  CHECK_THROWS_AS(clock_for_vector_flops(b200, 0, 2), shardlab::UserError);
}

TEST_CASE("a single-chip matmul's runtime on a B200 (gpus.md Quiz 1 Q4)") {
  const HardwareProfile& b200 = hardware("b200");
  const Roofline thin = matmul_roofline({.b = 64, .d = 4096, .f = 8192}, b200);
  const Roofline wide = matmul_roofline({.b = 512, .d = 4096, .f = 8192}, b200);
  const char* q4 = "gpus.md, Quiz 1 Q4 [Matmul runtime]";
  check({
      {q4, "fp16[64, 4096] x fp16[4096, 8192]: 2BD + 2DF + 2BF = 69e6 bytes", thin.bytes, 69e6, kBook},
      {q4, "... bandwidth-bound, 69e6 / 8e12 = 8.6 us", thin.lower_bound, 8.6e-6, kBook},
      // The book divides by 2.3e15 here; the profile's (and its Question 3's) 2.25e15 gives 15.3 us.
      {q4, "fp16[512, 4096] x ...: compute-bound, 2 x 512 x 4096 x 8192 / 2.3e15 = 15 us", wide.lower_bound, 15e-6,
       kBook},
  });
  CHECK_FALSE(thin.compute_bound);
  CHECK(wide.compute_bound);
}

TEST_CASE("sharded arrays and einsums: bytes, replication, HBM reads and FLOPs per device (sharding.md, transformers.md)") {
  // Pop Quiz [2D sharding across 1 axis]: fp32[1024, 4096] as A[I_XY, J] on {X: 8, Y: 2}.
  const ShardedArray pop = shard_array({1024, 4096}, "XY,", parse_named_mesh("X=8,Y=2"), 4);
  // Question 1 [replicated sharding]: A[I_X, J, K] on {X: 4, Y: 8, Z: 2}.
  const ShardedArray q1 = shard_array({1024, 64, 64}, "X,,", parse_named_mesh("X=4,Y=8,Z=2"), 2);
  const double one_copy = 1024.0 * 64 * 64 * 2;
  // transformers.md Question 2: A[B_X, D_Y] *_D W[D_Y, F] on {X: 4, Y: 8, Z: 4}.
  const double b = 4096, d = 8192, f = 32768;
  const ShardedFlops q2 = sharded_flops(2 * b * d * f, {{'b', "X"}, {'d', "Y"}}, parse_named_mesh("X=4,Y=8,Z=4"));
  // transformers.md Question 3: A[I,J,K,L] * B[I,J,M,N,O] -> C[K,L,M,N,O] (here all sizes 2..8).
  const Roofline q3 = einsum_roofline(
      "ijkl,ijmno->klmno", {{'i', 2}, {'j', 3}, {'k', 4}, {'l', 5}, {'m', 6}, {'n', 7}, {'o', 8}}, {DType::kBf16},
      hardware("tpu-v5e"));
  const char* pop_where = "sharding.md, Pop Quiz [2D sharding across 1 axis]";
  check({
      {pop_where, "local fp32[64, 4096]: 4 x 64 x 4096 = 1 MiB per device", pop.bytes_per_device, 1 << 20, kExact},
      // The book divides 1e6 bytes by 3.4e12; the profile's 3.35e12 and the exact 1 MiB give 313 ns.
      {pop_where, "read from HBM on an H100: 1e6 / 3.4e12 = 294 ns", shard_read_seconds(pop, hardware("h100")),
       294e-9, kBook},
      {"sharding.md, Question 1 [replicated sharding]", "all chips' bytes over one copy: Y x Z = 16",
       q1.total_bytes / one_copy, 16, kExact},
      {"transformers.md, Question 2", "per TPU 2BDF / (X Y)", q2.per_device, 2 * b * d * f / 32, kExact},
      {"transformers.md, Question 2", "in total 2BDF x Z (not sharded over Z)", q2.over_mesh, 2 * b * d * f * 4,
       kExact},
      {"transformers.md, Question 3", "2 x I x J x K x L x M x N x O", q3.flops, 2.0 * 2 * 3 * 4 * 5 * 6 * 7 * 8,
       kExact},
  });
  CHECK(q1.replication == 16);
  CHECK(q2.replication == 4);
  CHECK_THROWS_AS(sharded_flops(1, {{'b', "X"}, {'d', "X"}}, parse_named_mesh("X=4")), shardlab::UserError);
  CHECK_THROWS_AS(sharded_flops(1, {{'b', "W"}}, parse_named_mesh("X=4")), shardlab::UserError);
}

TEST_CASE("the scalars one ring link carries in an AllGather and an AllToAll (sharding.md Question 10)") {
  // An N x N array A[I_X, J] over a ring of D devices (V = N^2 scalars): bytes over the
  // busiest link, one direction, are bandwidth_seconds x W.
  const LinkSpec link{1, 0};
  const double n2 = 1 << 20, devices = 64;
  const auto carried = [&](CollectiveOp op, bool bidirectional) {
    return torus_collective(op, n2, {{static_cast<int>(devices), true}}, link, bidirectional).bandwidth_seconds;
  };
  const char* q10 = "sharding.md, Question 10 [Fun with AllToAll]";
  check({
      {q10, "(1) one-way AllGather: N^2 (1 - 1/D) per link", carried(CollectiveOp::kAllGather, false),
       n2 * (1 - 1 / devices), kExact},
      {q10, "(2) one-way AllToAll: N^2 / 2 (1 - 1/D)", carried(CollectiveOp::kAllToAll, false),
       n2 / 2 * (1 - 1 / devices), kExact},
      {q10, "(3) half the AllGather's", carried(CollectiveOp::kAllToAll, false) / carried(CollectiveOp::kAllGather, false),
       0.5, kExact},
      {q10, "(4) both ways: the AllGather's halves",
       carried(CollectiveOp::kAllGather, true) / carried(CollectiveOp::kAllGather, false), 0.5, kBook},
      // D/2 (D/2 + 1) / 2 against D (D - 1) / 2 blocks: a factor 4 for large D.
      {q10, "(5) both ways: the AllToAll's falls 4x",
       carried(CollectiveOp::kAllToAll, false) / carried(CollectiveOp::kAllToAll, true), 4, kBook},
      {q10, "(6) AllToAll a quarter of an AllGather both ways",
       carried(CollectiveOp::kAllToAll, true) / carried(CollectiveOp::kAllGather, true), 0.25, kExact},
  });
}

TEST_CASE("a ragged AllToAll in a GPU node (gpus.md Pop Quiz 2 [AllToAll time])") {
  const double b = 1 << 30, n = 8, w = 450e9;
  const CollectiveCost dense = collective_cost(CollectiveOp::kAllToAll, b, {8}, hardware("h100"));
  const CollectiveCost ragged = ragged_all_to_all(dense, 4, 8);
  const char* pq2 = "gpus.md, Pop Quiz 2 [AllToAll time]";
  check({
      {pq2, "dense, in a node of N = 8: B (N - 1) / (W N^2)", dense.seconds, b * (n - 1) / (w * n * n), kExact},
      {pq2, "4 of 8 non-zero: k/N of it, B / (2 W N) with the (N - 1) / N", ragged.seconds,
       b * (n - 1) / (w * n * n) * 4 / n, kExact},
      {pq2, "'roughly half the overall cost'", ragged.seconds / dense.seconds, 0.5, kExact},
  });
  CHECK(ragged_all_to_all(dense, 16, 8).seconds == dense.seconds);  // k >= N: dense
  CHECK_THROWS_AS(ragged_all_to_all(dense, 0, 8), shardlab::UserError);
}

TEST_CASE("an MoE's decode batch to be compute-bound with int8 weights (transformers.md Question 8)") {
  // E D F int8 bytes for 2 k B D F FLOPs: k B / E > 120 on v5e, B > 120 E / k.
  const double dense = matmul_critical_batch_approx({.b = 1, .d = 8192, .f = 32768, .w = DType::kInt8},
                                                    hardware("tpu-v5e"));
  check({
      {"transformers.md, Question 8", "int8 weights, bf16 FLOPs: B > 120 per expert", dense, 120, kBook},
      {"transformers.md, Question 8", "DeepSeek, E = 256, k = 8: B > 120 x 256 / 8 = 3840",
       moe_critical_batch(dense, 256, 8), 3840, kBook},
  });
}
