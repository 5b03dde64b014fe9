// The book's worked figures, one test case per figure. kBook: the book rounds to ~2
// significant figures, so +-10%. kExact: where the exact arithmetic is known, the
// calculators must match it tightly.
#include <doctest/doctest.h>

#include <cmath>

#include "framework/error.h"
#include "parallel/cost/cost.h"  // the whole model: its index header must compile on its own

using namespace shardlab::cost;
using shardlab::nn::Remat;

namespace {

constexpr double kBook = 0.10;
constexpr double kExact = 1e-3;
constexpr double kUs = 1e-6, kMs = 1e-3;

doctest::Approx book(double v) { return doctest::Approx(v).epsilon(kBook).scale(0); }
doctest::Approx exact(double v) { return doctest::Approx(v).epsilon(kExact).scale(0); }

const HardwareProfile& v4p() { return hardware("tpu-v4p"); }
const HardwareProfile& v5e() { return hardware("tpu-v5e"); }
const HardwareProfile& v5p() { return hardware("tpu-v5p"); }
const HardwareProfile& h100() { return hardware("h100"); }

// A dense LLaMA-style shape from the book's letters (MHA unless K given).
TransformerShape shape(int64_t l, int64_t d, int64_t f, int64_t n, int64_t h, int64_t v, int64_t k = 0) {
  TransformerShape s;
  s.layers = l, s.d_model = d, s.d_ff = f, s.heads = n, s.head_dim = h, s.vocab = v;
  s.kv_heads = k ? k : n;
  s.context = 8192;
  return s;
}

}  // namespace

TEST_CASE("R1: time of 1e12 FLOPs on H100 and TPU v6e") {
  CHECK(roofline(1e12, 0, peak_flops(h100(), DType::kBf16), 1).t_math == book(1.01 * kMs));
  CHECK(roofline(1e12, 0, peak_flops(hardware("tpu-v6e"), DType::kBf16), 1).t_math == book(1.1 * kMs));
}

TEST_CASE("R2: critical intensity of TPU v5e is ~240 FLOPs/byte") {
  CHECK(critical_intensity(v5e(), DType::kBf16) == book(240));
  const MatmulSpec big{.b = 1, .d = 1 << 20, .f = 1 << 20};  // B << D, F: intensity -> B
  CHECK(matmul_critical_batch(big, v5e()) == book(240));
}

TEST_CASE("R4: 2-chip matmul sharded on D is compute-bound iff D > 8755, for any B") {
  for (int64_t b : {512, 4096}) {
    const MatmulSpec m{.b = b, .d = 16384, .f = 16384};
    const ShardedMatmul s = contraction_sharded_matmul(m, 2, v5e());
    CHECK(s.critical_d == exact(2 * 1.97e14 / 4.5e10));  // 8755.6
    CHECK(s.roofline.t_math == exact(static_cast<double>(b) * 16384 * 16384 / 1.97e14));
    CHECK(s.roofline.t_comms == exact(2.0 * b * 16384 / 4.5e10));
    CHECK(s.roofline.compute_bound);  // D = 16384 > 8755
  }
  CHECK_FALSE(contraction_sharded_matmul({.b = 512, .d = 8192, .f = 16384}, 2, v5e()).roofline.compute_bound);
}

TEST_CASE("R5: int8 matmul roofline on TPU v5e") {
  const MatmulSpec m{.b = 512, .d = 8192, .f = 16384, .x = DType::kInt8, .w = DType::kInt8, .out = DType::kInt8};
  const double b = 512, d = 8192, f = 16384;
  const Roofline r = matmul_roofline(m, v5e());
  CHECK(r.flops == exact(2 * b * d * f));
  CHECK(r.bytes == exact(b * d + d * f + b * f));
  CHECK(r.critical_intensity == exact(3.94e14 / 8.1e11));  // 486
  CHECK(r.critical_intensity == book(486));
  CHECK(r.t_math == exact(2 * b * d * f / 3.94e14));
  CHECK(r.t_comms == exact((b * d + d * f + b * f) / 8.1e11));
  CHECK(r.lower_bound == exact(std::max(r.t_math, r.t_comms)));
  CHECK(r.upper_bound == exact(r.t_math + r.t_comms));
  CHECK(r.compute_bound);  // B = 512 > 243
  CHECK(matmul_critical_batch({.b = 1, .d = 1 << 20, .f = 1 << 20, .x = DType::kInt8, .w = DType::kInt8,
                               .out = DType::kInt8},
                              v5e()) == book(243));
  CHECK_FALSE(matmul_roofline({.b = 128, .d = 8192, .f = 16384, .x = DType::kInt8, .w = DType::kInt8,
                               .out = DType::kInt8},
                              v5e())
                  .compute_bound);
}

TEST_CASE("R6: bf16 activations x int8 weights are compute-bound iff B > 120") {
  const MatmulSpec m{.b = 1, .d = 1 << 20, .f = 1 << 20, .x = DType::kBf16, .w = DType::kInt8};
  CHECK(compute_dtype(m.x, m.w) == DType::kBf16);
  CHECK(matmul_critical_batch(m, v5e()) == book(120));
}

TEST_CASE("S3: on TPU v5e, shards below 45 kB are latency-bound") {
  CHECK(v5e().ici.bandwidth * v5e().ici.latency == exact(45e3));
  const RingAxis ring{4, true};
  CHECK(torus_collective(CollectiveOp::kAllGather, 4 * 40e3, {ring}, v5e().ici).latency_bound);
  CHECK_FALSE(torus_collective(CollectiveOp::kAllGather, 4 * 50e3, {ring}, v5e().ici).latency_bound);
}

TEST_CASE("S4: AllGather_Y over a v5e mesh {X:8, Y:4}") {
  const double v = 2.0 * 2048 * 8192;  // 33.5 MB gathered, 8.4 MB per device
  CHECK(v / 4 == book(8.4e6));
  // The naive bidirectional formula V / W_bidir, i.e. a ring with wraparound:
  CHECK(torus_collective(CollectiveOp::kAllGather, v, {{4, true}}, v5e().ici).seconds == book(377 * kUs));
  // v5e has no wraparound on an axis of 4: 3 hops of 8.4 MB one way.
  CHECK_FALSE(v5e().axis_wraps(4));
  const CollectiveCost line = collective_cost(CollectiveOp::kAllGather, v, {4}, v5e());
  CHECK(line.seconds == exact(3 * (v / 4) / 4.5e10));
  CHECK(line.seconds == book(560 * kUs));
  // E = F = 256: 32 kB shards -> latency-bound, 3 hops x 1 us.
  const CollectiveCost small = collective_cost(CollectiveOp::kAllGather, 2.0 * 256 * 256, {4}, v5e());
  CHECK(small.latency_bound);
  CHECK(small.hops == 3);
  CHECK(small.seconds == book(3 * kUs));
}

TEST_CASE("S6: collectives on a v4p 4x4x4 torus, B=1024, D=4096") {
  const double b = 1024, d = 4096, x = 4, y = 4;
  CHECK(v4p().axis_wraps(4));
  CHECK(collective_cost(CollectiveOp::kAllGather, 2 * b * d / y, {4}, v4p()).seconds == book(23 * kUs));
  CHECK(collective_cost(CollectiveOp::kAllGather, 2 * b * d / y, {4}, v4p()).seconds ==
        exact(2 * b * d / (9e10 * y)));
  const CollectiveCost xy = collective_cost(CollectiveOp::kAllGather, 2 * b * d, {4, 4}, v4p());
  CHECK(xy.seconds == exact(2 * b * d / (2 * 9e10)));  // 46 us
  CHECK(xy.seconds == book(46 * kUs));
  CHECK(xy.latency_seconds == book(4 * kUs));  // the latency floor
  const CollectiveCost z = collective_cost(CollectiveOp::kAllReduce, 2 * b * d / (x * y), {4}, v4p());
  CHECK(z.seconds == exact(4 * b * d / (x * y * 9e10)));
  CHECK(z.seconds == book(11.6 * kUs));
}

TEST_CASE("S7: AllGather_X of 128 bf16 values on v4p is latency-bound, ~2 us") {
  const CollectiveCost c = collective_cost(CollectiveOp::kAllGather, 2 * 128, {4}, v4p());
  CHECK(c.latency_bound);
  CHECK(c.hops == 2);
  CHECK(c.seconds == book(2 * kUs));
}

TEST_CASE("S11: AllToAll costs V max(A,B,C) / (4 N W_bidir); 1D V / (4 W_bidir)") {
  const LinkSpec link{4.5e10, 0};
  const double w_bidir = 2 * link.bandwidth, v = 1e9;
  CHECK(torus_collective(CollectiveOp::kAllToAll, v, {{8, true}}, link).seconds == exact(v / (4 * w_bidir)));
  CHECK(torus_collective(CollectiveOp::kAllToAll, v, {{4, true}, {4, true}, {4, true}}, link).seconds ==
        exact(v * 4 / (4 * 64 * w_bidir)));
  CHECK(torus_collective(CollectiveOp::kAllToAll, v, {{2, true}, {8, true}}, link).seconds ==
        exact(v * 8 / (4 * 16 * w_bidir)));
  // A quarter of an all_gather of the same array on a bidirectional ring.
  CHECK(torus_collective(CollectiveOp::kAllToAll, v, {{16, true}}, link).seconds ==
        exact(torus_collective(CollectiveOp::kAllGather, v, {{16, true}}, link).seconds / 4));
}

TEST_CASE("X1: 64-layer D=4096 MHA model: params, attention share, int8 KV per token") {
  const TransformerShape s = shape(64, 4096, 16384, 32, 128, 32000);
  const ParamCounts p = count_params(s);
  CHECK(p.total == exact(17.44e9));  // [check] exact arithmetic
  CHECK(p.total == doctest::Approx(16e9).epsilon(0.1).scale(0));  // the book's rounded 4e3/16e3/32e3
  CHECK(p.attention / p.total == book(0.25));
  CHECK(kv_bytes_per_token(s, DType::kInt8) == 524288);  // [check]; the book's "512 kB"
}

TEST_CASE("X1 backwards: a model given by its parameter count and width gets its layer count") {
  // transformers.md Q1's 17.4e9 at D=4096, F=16384, N=32, V=32000: L=64 again.
  TransformerShape s = shape(64, 4096, 16384, 32, 128, 32000);
  s.layers = 0;
  CHECK(shape_for_params(17.44e9, s).layers == 64);
  // LLaMA-3 70B's shape without its depth: its 70.55e9 give 80 layers back.
  TransformerShape llama = model_preset("llama3-70b");
  const double total = count_params(llama).total;
  llama.layers = 0;
  CHECK(shape_for_params(total, llama).layers == 80);
  // Less than one layer plus the embeddings: an error naming the count.
  CHECK_THROWS_WITH_AS(shape_for_params(1e9, llama), doctest::Contains("does not reach"), shardlab::UserError);
}

TEST_CASE("X4: attention FLOPs equal QKVO FLOPs at T = 2D") {
  const TransformerShape s = shape(1, 4096, 16384, 32, 128, 32000);
  CHECK(attention_crossover_context(s) == 8192);
  TransformerShape at = s;
  at.context = 8192;
  const double qkvo_train = 6 * count_params(at).attention;  // one layer
  CHECK(3 * attention_flops_per_token(at, 8192) == exact(qkvo_train));
}

TEST_CASE("X6: activations of a 4M-token batch, L=64, D=8192, with and without remat") {
  const TransformerShape s = shape(64, 8192, 3 * 8192, 64, 128, 32000);
  const double tokens = 4e6;
  CHECK(saved_activations_per_token_layer(s, Remat::None) == 20 * 8192.0);  // the book's ~20
  CHECK(activation_bytes(tokens, 64, saved_activations_per_token_layer(s, Remat::None), DType::kBf16) ==
        book(84e12));
  CHECK(activation_bytes(tokens, 64, saved_activations_per_token_layer(s, Remat::Full), DType::kBf16) ==
        book(4.2e12));
  CHECK(activation_bytes(4 << 20, 64, saved_activations_per_token_layer(s, Remat::Full), DType::kBf16) ==
        book(4.2e12));
  CHECK(train_flops_per_token(s, Remat::Full) / train_flops_per_token(s, Remat::None) == exact(8.0 / 6));
  CHECK(saved_activations_per_token_layer(s, Remat::SaveMlpMatmulOutputs) == 7 * 8192.0);  // "~7"
}

TEST_CASE("X7: 8k-context int8 KV cache of L=64, K H = 8192 is 8 GiB") {
  const TransformerShape s = shape(64, 8192, 32768, 64, 128, 32000);
  CHECK(8192 * kv_bytes_per_token(s, DType::kInt8) == 8.0 * (1 << 30));
}

TEST_CASE("TR2: DP/FSDP critical batch on v5p: 2550 per chip on 1 axis, 850 on 3") {
  CHECK(dp_critical_batch(v5p(), 1) == exact(2550));
  CHECK(dp_critical_batch(v5p(), 3) == exact(850));
  CHECK(dp_critical_batch(v5p(), 3) * 8960 == book(7.6e6));
}

TEST_CASE("TR4: LLaMA-3 70B training run") {
  const double flops = train_flops(70e9, 15e12);
  CHECK(flops == exact(6.3e24));
  const double chips = 16e6 / dp_critical_batch(v5p(), 3);
  CHECK(chips == book(18823));
  CHECK(flops / (chips * 4.59e14 * 0.5) / 86400 == book(17));
}

TEST_CASE("TR6: optimal FSDP x TP split on 4x4x4, B=48000, F=32768") {
  const FsdpTpSplit with_axes = optimal_fsdp_tp_split(48000, 32768, 64, 2, 1);
  CHECK(with_axes.x_opt == book(13.9));
  CHECK(with_axes.fsdp == 16);
  CHECK(with_axes.tensor == 4);
  CHECK(optimal_fsdp_tp_split(48000, 32768, 64, 1, 1).x_opt == exact(9.68));  // [check] M_X/M_Y = 1
}

TEST_CASE("TR7: FSDP+TP critical batch is ~99 per chip at F=32768") {
  CHECK(fsdp_tp_critical_batch(32768, v5p(), 2, 1) == book(99));
  CHECK(fsdp_tp_critical_batch(32768, v5p(), 2, 1) < dp_critical_batch(v5p(), 3) / 8);
}

TEST_CASE("TR11: LLaMA-2 13B parameters by part") {
  const ParamCounts p = count_params(model_preset("llama2-13b"));
  CHECK(p.mlp == book(8.5e9));
  CHECK(p.attention == book(4.2e9));
  CHECK(p.embedding + p.unembedding == book(0.3e9));
  CHECK(p.total == book(13.1e9));
}

TEST_CASE("TR12: LLaMA-2 13B memory, 16M-token batch, Adam, MLP-matmul checkpoints") {
  const TrainingMemory m = training_memory(model_preset("llama2-13b"), 16e6, Remat::SaveMlpMatmulOutputs, {});
  CHECK(m.params + m.optimizer == book(130e9));
  CHECK(m.activations == exact(2.0 * 40 * 16e6 * 5120 * (1 + 2 * 2.7)));
  CHECK(m.activations == book(42e12));
}

TEST_CASE("AT1: LLaMA-3 70B parameters by part") {
  const ParamCounts p = count_params(model_preset("llama3-70b"));
  CHECK(p.mlp == book(56.3e9));
  CHECK(p.embedding + p.unembedding == book(2.1e9));
  CHECK(p.attention == book(12e9));
  CHECK(p.total == exact(70.55e9));  // [check]
}

TEST_CASE("AT2-AT4: LLaMA-3 70B FLOPs and training time on v5p") {
  CHECK(train_flops(70e9, 1) == exact(4.2e11));
  CHECK(train_flops(70e9, 1) / 4.59e14 == book(1 * kMs));
  CHECK(6 * count_params(model_preset("llama3-70b")).matmul == book(4.2e11));
  const double run = train_flops(70e9, 15e12);
  CHECK(run / peak_flops(v5p(), DType::kBf16) / (365 * 86400.0) == book(435));
  CHECK(run / (8960 * 4.59e14 * 0.4) == book(3.8e6));
  CHECK(run / (8960 * 4.59e14 * 0.4) / 86400 == book(44));
}

TEST_CASE("AT8: LLaMA-3 70B FSDP+TP on a v5p pod") {
  CHECK(fsdp_tp_critical_batch(28672, v5p(), 2, 1) == book(113));
  const FsdpTpSplit s = optimal_fsdp_tp_split(4 << 20, 28672, 8960, 2, 1);
  CHECK(s.x_opt == book(1618));
  CHECK(s.fsdp == 2048);
  CHECK(s.tensor == 4);
}

TEST_CASE("I2: 30B int8 model decoding on a v5e 4x4, 8192 context, 100 kB KV per token") {
  const ServedModel m{30e9, 30e9, 100e3, 0};
  CHECK(8192 * m.kv_bytes_per_token == book(819e6));
  const InferenceConfig small{.batch = 4, .context = 8192, .chips = 16, .weights = DType::kInt8};
  const DecodeEstimate d4 = estimate_decode(m, small, v5e());
  CHECK(d4.step_seconds == exact((4 * 819.2e6 + 30e9) / (16 * 8.1e11)));
  CHECK(d4.step_seconds == book(2.5 * kMs));
  CHECK(d4.memory_bound);
  InferenceConfig large = small;
  large.batch = 256;
  const DecodeEstimate d256 = estimate_decode(m, large, v5e());
  CHECK(d256.step_seconds == exact(256 * 819.2e6 / (16 * 8.1e11) + 2 * 256 * 30e9 / (16 * 1.97e14)));
  CHECK(d256.step_seconds == book(21 * kMs));
  CHECK_FALSE(d256.memory_bound);  // the weight matmuls turned compute-bound (256 > ~120)
}

TEST_CASE("I3: LLaMA-2 13B KV cache of one 8192-token sequence in bf16 is 6.7 GB") {
  CHECK(8192 * kv_bytes_per_token(model_preset("llama2-13b"), DType::kBf16) == exact(8192.0 * 40 * 128 * 40 * 2 * 2));
  CHECK(8192 * kv_bytes_per_token(model_preset("llama2-13b"), DType::kBf16) == book(6.7e9));
}

TEST_CASE("I4: LLaMA-2 13B generation on 8 x v5e: KV, memory, step and throughput per batch") {
  HardwareProfile hw = v5e();
  hw.hbm_bandwidth = 8.2e11;  // [check] the book's table uses 8.2e11 B/s per chip
  const ServedModel m = served_model(model_preset("llama2-13b"), DType::kBf16);
  struct Row { int64_t batch; double kv, total, step_ms, tokens_per_s; };
  const Row rows[] = {{1, 6.7, 32.7, 4.98, 200.61},      {8, 53.6, 79.6, 12.13, 659.30},
                      {16, 107.2, 133.2, 20.30, 787.99}, {32, 214.4, 240.4, 36.65, 873.21},
                      {64, 428.8, 454.8, 69.33, 923.13}, {240, 1608, 1634, 249.09, 963.53}};
  for (const Row& row : rows) {
    CAPTURE(row.batch);
    const DecodeEstimate d = estimate_decode(m, {.batch = row.batch, .context = 8192, .chips = 8}, hw);
    // The table's cells are rounded to 0.1 GB; exact counts agree within 1%.
    CHECK(d.kv_bytes == doctest::Approx(row.kv * 1e9).epsilon(0.01).scale(0));
    CHECK(d.weight_bytes + d.kv_bytes == doctest::Approx(row.total * 1e9).epsilon(0.01).scale(0));
    CHECK(d.step_seconds == doctest::Approx(row.step_ms * kMs).epsilon(0.01).scale(0));
    CHECK(d.tokens_per_second == doctest::Approx(row.tokens_per_s).epsilon(0.01).scale(0));
    CHECK(d.memory_bound);
  }
}

TEST_CASE("I10: 18.4e9 int8 params on 16 v5e: decode step >= 1.3 ms") {
  const ServedModel m{18.4e9, 18.4e9, 0, 0};
  const DecodeEstimate d = estimate_decode(m, {.batch = 1, .context = 1, .chips = 16, .weights = DType::kInt8}, v5e());
  CHECK(d.step_seconds == exact(18.4e9 / (8.1e11 * 16)));  // 1.42 ms; the book truncates 1.39 to 1.3
  CHECK(d.step_seconds == book(1.3 * kMs));
}

TEST_CASE("AI2: LLaMA-3 70B int8 KV: 160 kB/token, 5.3 GB per 32k sequence, 86 v5e at BS=240") {
  const TransformerShape s = model_preset("llama3-70b");
  CHECK(kv_bytes_per_token(s, DType::kInt8) == 2 * 8 * 128 * 80);
  CHECK(kv_bytes_per_token(s, DType::kInt8) == book(160e3));
  const ServedModel m = served_model(s, DType::kInt8);
  const DecodeEstimate d =
      estimate_decode(m, {.batch = 240, .context = 32768, .chips = 1, .weights = DType::kInt8}, v5e());
  CHECK(d.kv_bytes / 240 == book(5.3e9));
  CHECK(d.kv_bytes == book(1.3e12));
  CHECK(d.min_chips == book(86));
}

TEST_CASE("AI3-AI4: LLaMA-3 70B, BS=32, 8192 context, int8: 7 chips -> v5e 4x2, ~17 ms per step") {
  const ServedModel m = served_model(model_preset("llama3-70b"), DType::kInt8);
  InferenceConfig c{.batch = 32, .context = 8192, .chips = 8, .weights = DType::kInt8};
  const DecodeEstimate d = estimate_decode(m, c, v5e());
  CHECK(d.kv_bytes == book(41.9e9));
  CHECK(d.weight_bytes + d.kv_bytes == book(112e9));
  CHECK((d.weight_bytes + d.kv_bytes) / v5e().hbm_bytes == book(7));
  CHECK(slice_chips(d.weight_bytes + d.kv_bytes, v5e()) == 8);  // 4x2
  CHECK(d.fits);
  CHECK(d.step_seconds == book(17 * kMs));
  CHECK(d.tokens_per_second == book(1882));
  CHECK(d.tokens_per_second_per_chip == book(235));
  CHECK(tp_max_degree(28672, v5e(), 2) == book(26));
  c.chips = 16;
  const DecodeEstimate d16 = estimate_decode(m, c, v5e());
  CHECK(d16.step_seconds == book(8.5 * kMs));
  CHECK(d16.tokens_per_second_per_chip == doctest::Approx(d.tokens_per_second_per_chip).epsilon(0.01).scale(0));
}

TEST_CASE("AI11: prefill of 8192 tokens of LLaMA-3 70B on 16 v5e at 40% MFU takes ~0.91 s") {
  const ServedModel m = served_model(model_preset("llama3-70b"), DType::kInt8);
  const InferenceConfig c{.batch = 1, .context = 8192, .chips = 16, .weights = DType::kInt8, .efficiency = 0.4};
  const PrefillEstimate p = estimate_prefill(m, c, v5e());
  CHECK(p.matmul_flops / (16 * 1.97e14 * 0.4) == book(0.91));  // the book's 2 N T
  CHECK(p.compute_bound);
  // Full-square attention adds 4 T N H L per token (+15% at T = 8192); the book leaves it out.
  CHECK(p.seconds == doctest::Approx(0.91 * 1.15).epsilon(0.05).scale(0));
}

TEST_CASE("G3: critical matmul intensity of H100 and B200, bf16 and fp8") {
  CHECK(critical_intensity(h100(), DType::kBf16) == book(295));
  CHECK(critical_intensity(hardware("b200"), DType::kBf16) == book(281));
  CHECK(critical_intensity(h100(), DType::kFp8) == book(590));
  CHECK(critical_intensity(hardware("b200"), DType::kFp8) == book(562));
}

TEST_CASE("G10: AllGather of bf16[D_X, F] over 8 H100, D=4096, F=65536") {
  const double v = 2.0 * 4096 * 65536;
  const CollectiveCost c = gpu_collective(CollectiveOp::kAllGather, v, 8, h100());
  CHECK(c.seconds == exact(v * 7 / (8 * 450e9)));  // [check]
  CHECK(c.seconds == book(1.04 * kMs));
  CHECK(c.path == "nvlink");
}

TEST_CASE("G11: AllGather of bf16[B_X, F] over 8 H100, B=1024, F=16384") {
  const double v = 2.0 * 1024 * 16384;
  CHECK(v / 450e9 == book(75 * kUs));  // the rough bound
  CHECK(gpu_collective(CollectiveOp::kAllGather, v, 8, h100()).seconds == book(65 * kUs));
}

TEST_CASE("G22: DP critical batch on GPUs, inside a node and across nodes") {
  CHECK(dp_critical_batch(h100(), 1) == exact(2200));
  CHECK(dp_critical_batch(h100(), 1, true) == exact(2475));
  CHECK(16000 * dp_critical_batch(h100(), 1, true) == book(40e6));
  HardwareProfile h800 = h100();
  h800.ici.bandwidth = 300e9;  // the book's H800 figure
  CHECK(dp_critical_batch(h800, 1) == exact(3300));
  CHECK(2048 * dp_critical_batch(h800, 1) == book(6.7e6));
}
