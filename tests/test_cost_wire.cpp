// Wire dtypes in the cost model (issue 29): bytes on the wire for each format, the
// collectives of a training step priced with them, the book's data-parallel critical
// batch moving with the bytes per parameter, and the planner's advice to compress the
// wires of a communication-bound layout.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "framework/error.h"
#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/network/wire_format.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/tpu_conditions.h"
#include "parallel/cost/training/train_step.h"

using namespace shardlab::cost;

namespace {

doctest::Approx exact(double v) { return doctest::Approx(v).epsilon(1e-9).scale(0); }

TrainConfig gpt2(const WireDtypes& wire, double batch_tokens = 16 * 1024) {
  TrainConfig c;
  c.model = model_preset("gpt2-124m");
  c.batch_tokens = batch_tokens;
  c.precision.wire = wire;
  return c;
}

const AxisComm& find(const StepEstimate& e, const std::string& axis, const std::string& what) {
  for (const AxisComm& c : e.comms)
    if (c.axis == axis && c.what == what) return c;
  FAIL("no " << what << " on " << axis);
  throw;
}

}  // namespace

TEST_CASE("wire_bytes: fp32 4n, bf16 2n, int8 n + ceil(n/256)") {
  CHECK(wire_bytes(DType::kFp32, 1000) == 4000);
  CHECK(wire_bytes(DType::kBf16, 1000) == 2000);
  CHECK(wire_bytes(DType::kInt8, 1000) == 1004);  // 3 whole blocks and a partial one
  CHECK(wire_bytes(DType::kInt8, 256) == 257);
  CHECK(wire_bytes(DType::kInt8, 257) == 259);
  CHECK(wire_bytes(DType::kInt8, 0) == 0);
  CHECK(wire_bytes_per_value(DType::kInt8) == 1 + 1.0 / 256);
  CHECK_THROWS_WITH_AS(wire_bytes(DType::kFp8, 1), doctest::Contains("no collective carries fp8"), shardlab::UserError);
  CHECK(parse_wire_dtype("int8", "--reduce-dtype") == DType::kInt8);
  CHECK_THROWS_WITH_AS(parse_wire_dtype("fp16", "--reduce-dtype"),
                       "--reduce-dtype 'fp16' is not a wire dtype; choose fp32, bf16 or int8", shardlab::UserError);
}

TEST_CASE("a step's gradient reductions and parameter gathers carry the wire dtypes") {
  const HardwareProfile& hw = hardware("tpu-v5p");
  const Layout l{.data = 2, .fsdp = 2, .tensor = 2};
  const StepEstimate fp32 = estimate_train_step(gpt2({DType::kFp32, DType::kFp32}), l, hw);
  const struct {
    const char* axis;
    const char* what;
    bool gather;
  } rows[] = {{"fsdp", "all_gather(params) forward+backward", true},
              {"fsdp", "reduce_scatter(grads)", false},
              {"data", "all_reduce(grads)", false}};
  for (const auto& row : rows) {
    CAPTURE(row.what);
    const double n = find(fp32, row.axis, row.what).bytes / 4;  // values per call
    for (DType wire : {DType::kBf16, DType::kInt8}) {
      const WireDtypes w = row.gather ? WireDtypes{DType::kFp32, wire} : WireDtypes{wire, DType::kFp32};
      const StepEstimate e = estimate_train_step(gpt2(w), l, hw);
      const double expected = wire == DType::kBf16 ? 2 * n : n + std::ceil(n / 256);
      CHECK(find(e, row.axis, row.what).bytes == exact(expected));
      // Only the bytes change: compute and the tensor axis's activations stay.
      CHECK(e.compute_seconds == fp32.compute_seconds);
      CHECK(find(e, "tensor", "all_reduce(activations) per block").bytes ==
            find(fp32, "tensor", "all_reduce(activations) per block").bytes);
    }
  }
  // gpt2-124m's 124.4M parameters, half per tensor rank: the fsdp calls carry all of them,
  // the data all_reduce the fsdp shard.
  const double half = find(fp32, "fsdp", "reduce_scatter(grads)").bytes / 4;
  CHECK(find(fp32, "data", "all_reduce(grads)").bytes / 4 == exact(half / 2));
  const StepEstimate int8 = estimate_train_step(gpt2({DType::kInt8, DType::kInt8}), l, hw);
  CHECK(find(int8, "data", "all_reduce(grads)").bytes == exact(half / 2 + std::ceil(half / 2 / 256)));
}

TEST_CASE("the book's DP critical batch scales with the wire's bytes per parameter") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  // The book's C / W = 2550 tokens per chip on v5p holds for bf16 gradients.
  const double bf16 = dp_critical_batch(v5p, 1, false, DType::kBf16, DType::kBf16);
  CHECK(bf16 == exact(2550));
  CHECK(dp_critical_batch(v5p) == bf16);
  const double fp32 = dp_critical_batch(v5p, 1, false, DType::kBf16, DType::kFp32);
  const double int8 = dp_critical_batch(v5p, 1, false, DType::kBf16, DType::kInt8);
  CHECK(fp32 == exact(5100));
  CHECK(int8 == exact(2550 * 257.0 / 512));  // 1280: a byte and 1/256 of the block exponent
  CHECK(fp32 / bf16 == exact(2));
  CHECK(fp32 / int8 == exact(4 * 256.0 / 257));  // 3.98x: int8's exponents cost 0.4%
  CHECK(dp_critical_batch(hardware("h100"), 1, false, DType::kBf16, DType::kFp32) == exact(4400));

  // FSDP: the forward gather hides under the forward, the backward gather and
  // reduce_scatter under the backward; the larger bar binds.
  CHECK(wire_critical_factor({DType::kBf16, DType::kBf16}, true) == 1);
  CHECK(wire_critical_factor({DType::kFp32, DType::kBf16}, true) == 1.5);
  CHECK(wire_critical_factor({DType::kInt8, DType::kBf16}, true) == 1);  // the bf16 forward gather binds
  CHECK(wire_critical_factor({DType::kInt8, DType::kInt8}, true) == exact(257.0 / 512));

  // The whole layout's DP and FSDP bars move the same way.
  const Layout l{.data = 2, .fsdp = 8};
  const TrainConfig c16 = gpt2({}), c32 = gpt2({DType::kFp32, DType::kFp32}), c8 = gpt2({DType::kInt8, DType::kInt8});
  const LayoutConditions k16 = layout_conditions(c16, estimate_train_step(c16, l, v5p), v5p);
  const LayoutConditions k32 = layout_conditions(c32, estimate_train_step(c32, l, v5p), v5p);
  const LayoutConditions k8 = layout_conditions(c8, estimate_train_step(c8, l, v5p), v5p);
  CHECK(k32.dp_critical == exact(2 * k16.dp_critical));
  CHECK(k32.fsdp_critical == exact(2 * k16.fsdp_critical));
  CHECK(k8.dp_critical == exact(k16.dp_critical * 257 / 512));
  CHECK(k8.fsdp_critical == exact(k16.fsdp_critical * 257 / 512));
}

TEST_CASE("the planner says which wire would speed a communication-bound layout, and only there") {
  const HardwareProfile& v5p = hardware("tpu-v5p");
  const TrainConfig c = gpt2({});  // bf16 wires, 1024 tokens per chip on 16 chips
  const Plan plan = plan_training(c, 16, v5p);
  int advised = 0, compute_bound = 0;
  for (const PlanEntry& entry : plan.ranked) {
    CAPTURE(layout_summary(entry.estimate.layout));
    CAPTURE(entry.verdict);
    if (entry.estimate.compute_bound) {
      ++compute_bound;
      CHECK_FALSE(entry.compression);
      CHECK(entry.verdict.find("would cut") == std::string::npos);
    }
    if (!entry.compression) continue;
    ++advised;
    const WireAdvice& a = *entry.compression;
    CHECK_FALSE(entry.estimate.compute_bound);
    CHECK(a.estimate.step_seconds < entry.estimate.step_seconds);
    CHECK(entry.verdict.find(a.reason) != std::string::npos);
    // What it claims is what the cost model computes for those wires.
    TrainConfig compressed = c;
    compressed.precision.wire = a.wire;
    CHECK(estimate_train_step(compressed, entry.estimate.layout, v5p).step_seconds == a.estimate.step_seconds);
  }
  CHECK(advised > 0);
  CHECK(compute_bound > 0);
  CHECK(plan.ranked.front().verdict == "best");  // fsdp=16: compute-bound, nothing to advise

  // data=2 fsdp=8: 3.11 ms, bound by fsdp; int8 on both wires brings it to its compute.
  const StepEstimate e = estimate_train_step(c, Layout{.data = 2, .fsdp = 8}, v5p);
  const auto advice = wire_advice(c, e, v5p);
  REQUIRE(advice);
  CHECK(e.bottleneck == "fsdp");
  CHECK(advice->flags == "--reduce-dtype int8 --gather-dtype int8");
  CHECK(advice->estimate.compute_bound);
  CHECK(advice->reason ==
        "int8 gradient reductions and int8 gathers would cut the step from 0.00311 s to 0.00191 s, compute-bound "
        "(--reduce-dtype int8 --gather-dtype int8)");

  // The least compression that reaches compute-bound: from fp32 wires, fsdp=4 pipe=4 needs
  // int8 gathers, but bf16 gradients suffice (all int8 would do too; bf16 both would not).
  const TrainConfig c32 = gpt2({DType::kFp32, DType::kFp32});
  const Layout fp{.fsdp = 4, .pipe = 4, .microbatches = 4};
  const auto least = wire_advice(c32, estimate_train_step(c32, fp, v5p), v5p);
  REQUIRE(least);
  CHECK(least->reason == "bf16 gradient reductions and int8 gathers would cut the step from 0.00844 s to 0.00334 s, "
                         "compute-bound (--reduce-dtype bf16 --gather-dtype int8)");
  CHECK_FALSE(estimate_train_step(gpt2({DType::kBf16, DType::kBf16}), fp, v5p).compute_bound);
  CHECK(estimate_train_step(gpt2({DType::kInt8, DType::kInt8}), fp, v5p).compute_bound);
  // ... and a compute-bound layout gets none.
  CHECK_FALSE(wire_advice(c, estimate_train_step(c, Layout{.fsdp = 16}, v5p), v5p));
}
