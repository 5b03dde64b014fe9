// Gradient checks for every framework op, plus forward checks against direct formulas.
#include <doctest/doctest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>
#include <vector>

#include "framework/autograd.h"
#include "framework/memory.h"
#include "framework/ops.h"
#include "framework/ops/parallel_chunks.h"
#include "framework/precision.h"
#include "tests/gradcheck.h"

using namespace shardlab;
using shardlab::testing::gradcheck;
using shardlab::testing::random_tensor;
using V = std::vector<Tensor>;

// The gradients of sum(f(inputs) * dy) with respect to each input.
static V grad(const std::function<Tensor(V&)>& f, V inputs, const Tensor& dy) {
  for (Tensor& x : inputs) {
    x.set_requires_grad(true);
    x.zero_grad();
  }
  run_backward(f(inputs), dy);
  V out;
  for (Tensor& x : inputs) out.push_back(x.grad().clone());
  return out;
}

TEST_CASE("linear forward matches the definition and its gradient checks") {
  Tensor x = random_tensor({2, 3, 5}, 1), w = random_tensor({4, 5}, 2), b = random_tensor({4}, 3);
  Tensor y = ops::linear(x, w, b);
  REQUIRE(y.shape() == Shape{2, 3, 4});
  for (int r = 0; r < 6; ++r)
    for (int n = 0; n < 4; ++n) {
      double s = b.data()[n];
      for (int k = 0; k < 5; ++k) s += x.data()[r * 5 + k] * w.data()[n * 5 + k];
      CHECK(y.data()[r * 4 + n] == doctest::Approx(s).epsilon(1e-5));
    }
  gradcheck([](V& in) { return ops::linear(in[0], in[1], in[2]); }, {x, w, b});
  gradcheck([](V& in) { return ops::linear(in[0], in[1]); }, {x, w});
}

TEST_CASE("batched matmul") {
  gradcheck([](V& in) { return ops::matmul(in[0], in[1]); }, {random_tensor({2, 3, 4}, 1), random_tensor({2, 4, 5}, 2)});
  gradcheck([](V& in) { return ops::matmul(in[0], in[1]); }, {random_tensor({3, 4}, 3), random_tensor({4, 2}, 4)});
}

TEST_CASE("pointwise ops") {
  Tensor a = random_tensor({3, 4}, 1), b = random_tensor({3, 4}, 2), row = random_tensor({4}, 3);
  gradcheck([](V& in) { return ops::add(in[0], in[1]); }, {a, b});
  gradcheck([](V& in) { return ops::add(in[0], in[1]); }, {a, row});
  gradcheck([](V& in) { return ops::mul(in[0], in[1]); }, {a, b});
  gradcheck([](V& in) { return ops::mul(in[0], in[1]); }, {a, row});
  gradcheck([](V& in) { return ops::scale(in[0], -1.5f); }, {a});
  gradcheck([](V& in) { return ops::gelu(in[0]); }, {a});
  gradcheck([](V& in) { return ops::silu(in[0]); }, {a});
  gradcheck([](V& in) { return ops::swiglu(in[0], in[1]); }, {a, b});
  gradcheck([](V& in) { return ops::mean(in[0]); }, {a});
  gradcheck([](V& in) { return ops::sum(ops::mul(in[0], in[0])); }, {a});
  CHECK(ops::gelu(Tensor::full({1}, 1.0f)).item() == doctest::Approx(0.8411920f).epsilon(1e-5));
}

TEST_CASE("column_sums: exact on integer data, the same bits at any thread count and column slice") {
  // Shapes around the 128-row blocks and 1024-column tasks, and a bias gradient's.
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 5}, {1, 7}, {127, 3}, {128, 1024}, {129, 1025}, {300, 70}, {2048, 256}, {8, 70000}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    std::vector<float> in(static_cast<size_t>(rows * cols)), out(static_cast<size_t>(cols), -1.0f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(static_cast<int>(i * 7919 % 17) - 8);
    ops::column_sums(in.data(), rows, cols, out.data());
    for (int64_t j = 0; j < cols; ++j) {  // integer sums below 2^24: every order gives these bits
      double s = 0;
      for (int64_t i = 0; i < rows; ++i) s += in[static_cast<size_t>(i * cols + j)];
      REQUIRE(out[static_cast<size_t>(j)] == static_cast<float>(s));
    }
  }
  // Real-valued data, where the order shows in the bits: one thread and two agree, and a
  // slice of the columns (a tensor-parallel bias shard) sums to the same bits as the whole.
  const int64_t rows = 1000, cols = 1500, c0 = 200, width = 900;
  Tensor x = random_tensor({rows, cols}, 7);
  std::vector<float> one(cols), two(cols), slice(width);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ops::column_sums(x.data(), rows, cols, one.data());
  omp_set_num_threads(2);
  ops::column_sums(x.data(), rows, cols, two.data());
  Tensor part = Tensor::empty({rows, width});
  for (int64_t i = 0; i < rows; ++i)
    std::copy_n(x.data() + i * cols + c0, width, part.data() + i * width);
  ops::column_sums(part.data(), rows, width, slice.data());
  omp_set_num_threads(threads);
  CHECK(one == two);
  CHECK(std::equal(slice.begin(), slice.end(), one.begin() + c0));
}

TEST_CASE("norms") {
  Tensor x = random_tensor({3, 8}, 1), w = random_tensor({8}, 2), b = random_tensor({8}, 3);
  gradcheck([](V& in) { return ops::layer_norm(in[0], in[1], in[2]); }, {x, w, b});
  gradcheck([](V& in) { return ops::rms_norm(in[0], in[1]); }, {x, w});
  Tensor y = ops::layer_norm(x, Tensor::full({8}, 1.0f), Tensor::zeros({8}));
  double m = 0, v = 0;
  for (int j = 0; j < 8; ++j) m += y.data()[j];
  for (int j = 0; j < 8; ++j) v += y.data()[j] * y.data()[j];
  CHECK(m / 8 == doctest::Approx(0.0).scale(1.0).epsilon(1e-5));
  CHECK(v / 8 == doctest::Approx(1.0).epsilon(1e-3));
}

TEST_CASE("softmax and cross-entropy") {
  Tensor x = random_tensor({4, 6}, 1);
  gradcheck([](V& in) { return ops::softmax(in[0]); }, {x});
  std::vector<int32_t> targets{1, 5, ops::kIgnoreIndex, 0};
  gradcheck([&](V& in) { return ops::cross_entropy(in[0], targets); }, {x});
  gradcheck([&](V& in) { return ops::cross_entropy(in[0], targets, 10.0); }, {x});
  // Uniform logits: loss is ln V.
  CHECK(ops::cross_entropy(Tensor::zeros({2, 6}), std::vector<int32_t>{0, 3}).item() ==
        doctest::Approx(std::log(6.0)).epsilon(1e-6));
}

TEST_CASE("causal attention, multi-head and grouped-query") {
  for (auto [n, k] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{2, 1}}) {
    const int H = 4, T = 5, B = 2;
    Tensor qkv = random_tensor({B, T, (n + 2 * k) * H}, 7);
    gradcheck([n, k](V& in) { return ops::causal_attention(in[0], n, k); }, {qkv});
    // Position 0 attends only to itself: its output is its own value vector.
    Tensor y = ops::causal_attention(qkv, n, k);
    for (int h = 0; h < n; ++h)
      for (int j = 0; j < H; ++j)
        CHECK(y.data()[h * H + j] == doctest::Approx(qkv.data()[(n + k + h / (n / k)) * H + j]).epsilon(1e-5));
  }
}

TEST_CASE("causal attention across several row blocks matches a direct computation") {
  const int B = 1, T = 150, N = 2, K = 1, H = 2;  // 150 rows: blocks of 64, 64 and 22
  Tensor qkv = random_tensor({B, T, (N + 2 * K) * H}, 11);
  gradcheck([](V& in) { return ops::causal_attention(in[0], 2, 1); }, {qkv});
  Tensor y = ops::causal_attention(qkv, N, K);
  const int C = (N + 2 * K) * H;
  for (int t : {0, 63, 64, 100, 149}) {
    for (int h = 0; h < N; ++h) {
      std::vector<double> s(t + 1);
      double m = -1e30, z = 0;
      for (int j = 0; j <= t; ++j) {
        s[j] = 0;
        for (int i = 0; i < H; ++i) s[j] += qkv.data()[t * C + h * H + i] * qkv.data()[j * C + N * H + i];
        s[j] /= std::sqrt(double(H));
        m = std::max(m, s[j]);
      }
      for (int j = 0; j <= t; ++j) z += std::exp(s[j] - m);
      for (int i = 0; i < H; ++i) {
        double o = 0;
        for (int j = 0; j <= t; ++j) o += std::exp(s[j] - m) / z * qkv.data()[j * C + (N + K) * H + i];
        CHECK(y.data()[t * N * H + h * H + i] == doctest::Approx(o).epsilon(1e-4));
      }
    }
  }
}

TEST_CASE("causal attention ignores the future") {
  Tensor qkv = random_tensor({1, 6, 3 * 8}, 3);
  Tensor y1 = ops::causal_attention(qkv, 2, 2);
  Tensor changed = qkv.clone();
  for (int j = 0; j < 24; ++j) changed.data()[5 * 24 + j] += 1.0f;  // perturb the last position
  Tensor y2 = ops::causal_attention(changed, 2, 2);
  for (int i = 0; i < 5 * 8; ++i) CHECK(y1.data()[i] == y2.data()[i]);
}

TEST_CASE("blockwise causal attention equals causal attention, forward and backward") {
  for (auto [n, k] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{2, 1}}) {
    const int B = 2, T = 11, H = 4;
    Tensor qkv = random_tensor({B, T, (n + 2 * k) * H}, 21);
    const Tensor dy = random_tensor({B, T, n * H}, 22);
    const Tensor y_ref = ops::causal_attention(qkv, n, k);
    const std::vector<Tensor> g_ref = grad([&](V& in) { return ops::causal_attention(in[0], n, k); }, {qkv}, dy);
    for (int64_t block : {1, 3, 4, 11, 16}) {  // T = 11 is no multiple of 3 or 4
      const Tensor y = ops::blockwise_causal_attention(qkv, n, k, block);
      for (int64_t i = 0; i < y.numel(); ++i) CHECK(y.data()[i] == doctest::Approx(y_ref.data()[i]).epsilon(1e-5));
      const std::vector<Tensor> g =
          grad([&](V& in) { return ops::blockwise_causal_attention(in[0], n, k, block); }, {qkv}, dy);
      for (int64_t i = 0; i < qkv.numel(); ++i) {
        CHECK(std::abs(g[0].data()[i] - g_ref[0].data()[i]) <= 1e-5 + 1e-4 * std::abs(g_ref[0].data()[i]));
      }
    }
    gradcheck([n, k](V& in) { return ops::blockwise_causal_attention(in[0], n, k, 3); }, {qkv});
  }
}

TEST_CASE("block attention over permuted position spans: context parallelism's head-tail chunks") {
  // Rows hold chunks 1 and 2 of a sequence cut in 4 (positions 3..5 then 6..8): the
  // queries attend, chunk by chunk in any order, to key blocks holding chunks {0, 3} and
  // {1, 2}, as the head-tail split of 2 ranks gives them. The rows must match the same
  // positions of whole-sequence attention, and the summed gradients its gradients.
  const int B = 1, T = 12, N = 4, K = 2, H = 2, L = 3;
  Tensor qkv = random_tensor({B, T, (N + 2 * K) * H}, 31);
  const Tensor y_ref = ops::causal_attention(qkv, N, K);
  const ops::AttentionHeads heads = ops::AttentionHeads::of(qkv, N, K);
  const auto rows_of = [&](std::vector<int> chunks) {  // qkv rows of the chunks, in that order
    Tensor out = Tensor::empty({B, static_cast<int64_t>(chunks.size()) * L, qkv.dim(2)});
    for (size_t c = 0; c < chunks.size(); ++c) {
      std::copy_n(qkv.data() + chunks[c] * L * qkv.dim(2), L * qkv.dim(2), out.data() + c * L * qkv.dim(2));
    }
    return out;
  };
  const auto spans = [&](std::vector<int> chunks) {
    std::vector<ops::PositionSpan> s;
    for (size_t c = 0; c < chunks.size(); ++c) s.push_back({.row = int64_t(c) * L, .position = chunks[c] * L, .length = L});
    return s;
  };
  const Tensor mine = rows_of({1, 2});
  ops::OnlineAttention attention(heads, mine);
  attention.attend(spans({1, 2}), ops::key_values(rows_of({1, 2}), heads), spans({1, 2}));
  attention.attend(spans({1, 2}), ops::key_values(rows_of({0, 3}), heads), spans({0, 3}));  // 3: all future
  const Tensor y = attention.finish();
  for (int c = 0; c < 2; ++c) {
    for (int64_t i = 0; i < L * N * H; ++i) {
      CHECK(y.data()[c * L * N * H + i] == doctest::Approx(y_ref.data()[(c + 1) * L * N * H + i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("rope at explicit positions equals rope of the whole sequence at those rows") {
  const int N = 2, K = 1, H = 4, T = 8;
  const Tensor qkv = random_tensor({1, T, (N + 2 * K) * H}, 41);
  const std::vector<int64_t> positions = {6, 1, 7, 0};  // rows 0..3 of qkv placed there
  const Tensor moved = ops::rope(qkv.view({T, (N + 2 * K) * H}).rows(0, 4).view({1, 4, (N + 2 * K) * H}).clone(), N, K,
                                 500000.0f, positions);
  const Tensor at3 = ops::rope(qkv, N, K, 500000.0f, std::vector<int64_t>{3, 4, 5, 6, 7, 8, 9, 10});
  const Tensor offset3 = ops::rope(qkv, N, K, 500000.0f, int64_t{3});
  for (int64_t i = 0; i < at3.numel(); ++i) CHECK(at3.data()[i] == offset3.data()[i]);
  const int64_t C = (N + 2 * K) * H;
  for (int64_t i = 0; i < 4; ++i) {  // row i alone at offset positions[i]
    const Tensor row = Tensor::from({1, 1, C}, std::vector<float>(qkv.data() + i * C, qkv.data() + (i + 1) * C));
    const Tensor one = ops::rope(row, N, K, 500000.0f, positions[i]);
    for (int64_t j = 0; j < C; ++j) CHECK(moved.data()[i * C + j] == one.data()[j]);
  }
  gradcheck([&](V& in) { return ops::rope(in[0], N, K, 10000.0f, positions); },
            {qkv.view({T, (N + 2 * K) * H}).rows(0, 4).view({1, 4, (N + 2 * K) * H}).clone()});
}

TEST_CASE("embedding and rope") {
  Tensor w = random_tensor({5, 3}, 1);
  std::vector<int32_t> ids{0, 4, 4, 2, 1, 0};
  gradcheck([&](V& in) { return ops::embedding(in[0], ids, 2, 3); }, {w});
  Tensor qkv = random_tensor({2, 3, 4 * 4}, 2);
  gradcheck([](V& in) { return ops::rope(in[0], 2, 1, 10000.0f, 3); }, {qkv});
  Tensor y = ops::rope(qkv, 2, 1);  // position 0 is not rotated
  for (int j = 0; j < 16; ++j) CHECK(y.data()[j] == qkv.data()[j]);
}

TEST_CASE("shape ops") {
  Tensor x = random_tensor({2, 3, 4}, 1);
  gradcheck([](V& in) { return ops::reshape(in[0], {6, 4}); }, {x});
  gradcheck([](V& in) { return ops::transpose(in[0], 0, 2); }, {x});
  gradcheck([](V& in) { return ops::narrow(in[0], 1, 1, 2); }, {x});
  gradcheck([](V& in) { return ops::narrow(in[0], 0, 1, 1); }, {x});
  gradcheck([](V& in) { return ops::concat(ops::split(in[0], 2, {1, 3}), 2); }, {x});
  gradcheck([](V& in) { return ops::concat({in[0], in[1]}, 0); }, {x, random_tensor({1, 3, 4}, 2)});
  Tensor t = ops::transpose(x, 1, 2);
  CHECK(t.data()[1 * 12 + 2 * 3 + 1] == x.data()[1 * 12 + 1 * 4 + 2]);
  // Swapping leading dims moves the trailing ones as contiguous runs: every element checked.
  gradcheck([](V& in) { return ops::transpose(in[0], 0, 1); }, {x});
  Tensor u = ops::transpose(x, 0, 1);  // [3, 2, 4]
  REQUIRE(u.shape() == Shape{3, 2, 4});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) CHECK(u.data()[(j * 2 + i) * 4 + k] == x.data()[(i * 3 + j) * 4 + k]);
}

TEST_CASE("gradients of a shared input sum; backward frees the graph") {
  Tensor a = random_tensor({4}, 1).set_requires_grad(true);
  Tensor y = ops::sum(ops::add(ops::mul(a, a), a));  // dy/da = 2a + 1
  y.backward();
  for (int i = 0; i < 4; ++i) CHECK(a.grad().data()[i] == doctest::Approx(2 * a.data()[i] + 1));
  CHECK(y.grad_fn()->edges.empty());
}

TEST_CASE("the graph keeps no intermediate that no backward reads; a bf16 linear keeps its input's bf16 copy") {
  Tensor a = random_tensor({64, 64}, 1).set_requires_grad(true);
  const auto live = [] { return MemoryTracker::live(MemoryCategory::Activations); };
  Tensor mid = ops::scale(a, 2.0f);           // read by no backward: add and scale keep nothing
  Tensor y = ops::sum(ops::add(mid, a));
  const int64_t with_mid = live();
  mid = Tensor();
  CHECK(live() == with_mid - 64 * 64 * static_cast<int64_t>(sizeof(float)));  // freed: the graph held no copy
  y.backward();
  CHECK(a.grad().data()[0] == doctest::Approx(3.0f));
  // linear's backward keeps x as it multiplied it: x itself in fp32, a bf16 copy under bf16.
  Tensor w = random_tensor({32, 64}, 2).set_requires_grad(true);
  for (const Bf16Matmul path : {Bf16Matmul::kNative, Bf16Matmul::kRounded}) {
    const PrecisionScope scope({.compute = DType::kBF16, .matmul = path});
    Tensor x = ops::scale(a, 1.0f);
    const int64_t before = live();
    Tensor out = ops::sum(ops::linear(x, w));
    x = Tensor();  // x's fp32 values: freed, the linear node keeps its own copy
    const int64_t copy = path == Bf16Matmul::kNative ? 2 : 4;
    CHECK(live() - before == 64 * 64 * (copy - 4) + 64 * 32 * 4 + 4);  // the copy for x, the output, the sum
    out.backward();
  }
}

TEST_CASE("no-grad guard records nothing; memory tracker counts storage") {
  Tensor a = random_tensor({4}, 1).set_requires_grad(true);
  {
    NoGradGuard g;
    CHECK_FALSE(ops::scale(a, 2.0f).requires_grad());
  }
  CHECK(ops::scale(a, 2.0f).requires_grad());
  const int64_t before = MemoryTracker::live(MemoryCategory::Optimizer);
  {
    MemoryScope scope(MemoryCategory::Optimizer);
    Tensor t = Tensor::zeros({1000});
    CHECK(MemoryTracker::live(MemoryCategory::Optimizer) == before + 4000);
  }
  CHECK(MemoryTracker::live(MemoryCategory::Optimizer) == before);
}

TEST_CASE("a leaf used twice gets one accumulation and one hook call per backward") {
  Tensor w = random_tensor({3}, 1).set_requires_grad(true);
  int calls = 0;
  w.add_grad_hook([&calls](Tensor&) { ++calls; });
  Tensor y = ops::sum(ops::add(ops::mul(w, w), ops::scale(w, 3.0f)));  // three edges into w
  y.backward();
  CHECK(calls == 1);
  for (int i = 0; i < 3; ++i) CHECK(w.grad().data()[i] == doctest::Approx(2 * w.data()[i] + 3));
  ops::sum(w).backward();  // a second pass accumulates and calls the hook again
  CHECK(calls == 2);
  for (int i = 0; i < 3; ++i) CHECK(w.grad().data()[i] == doctest::Approx(2 * w.data()[i] + 4));
}

TEST_CASE("deferred weight gradients: the input-gradient pass leaves linear's weight and bias for later") {
  const Tensor x = random_tensor({6, 5}, 1).set_requires_grad(true);
  const Tensor w = random_tensor({4, 5}, 2).set_requires_grad(true);
  const Tensor b = random_tensor({4}, 3).set_requires_grad(true);
  const Tensor x_ref = random_tensor({6, 5}, 1).set_requires_grad(true);
  const Tensor w_ref = random_tensor({4, 5}, 2).set_requires_grad(true);
  const Tensor b_ref = random_tensor({4}, 3).set_requires_grad(true);
  ops::sum(ops::gelu(ops::linear(x_ref, w_ref, b_ref))).backward();

  WeightGradients weights;
  {
    DeferWeightGradients defer(weights);
    ops::sum(ops::gelu(ops::linear(x, w, b))).backward();
  }
  CHECK(x.grad().span().size() == x_ref.grad().span().size());
  CHECK(std::equal(x.grad().span().begin(), x.grad().span().end(), x_ref.grad().span().begin()));
  CHECK_FALSE(w.grad().defined());
  CHECK_FALSE(b.grad().defined());
  CHECK_FALSE(weights.empty());
  weights.run();
  CHECK(weights.empty());
  CHECK(std::equal(w.grad().span().begin(), w.grad().span().end(), w_ref.grad().span().begin()));
  CHECK(std::equal(b.grad().span().begin(), b.grad().span().end(), b_ref.grad().span().begin()));
}

// The fused head against the ops it replaces, with chunks small enough that forward walks
// several row chunks (5 rows of 23 logits) and backward several vocabulary chunks (3 of 23).
TEST_CASE("linear_cross_entropy equals cross_entropy(linear) in chunks, and its gradient checks") {
  const int64_t R = 13, D = 6, Vv = 23;
  const Tensor x = random_tensor({R, D}, 1), w = random_tensor({Vv, D}, 2);
  const std::vector<int32_t> targets{3, 22, ops::kIgnoreIndex, 0, 7, 7, 11, ops::kIgnoreIndex, 19, 1, 5, 22, 13};
  ops::LinearCrossEntropyOptions small;
  small.chunk_bytes = 5 * Vv * 4;
  for (const double denominator : {0.0, 40.0}) {
    CAPTURE(denominator);
    const auto fused = [&](V& in) { return ops::linear_cross_entropy(in[0], in[1], targets, denominator, small); };
    const auto unfused = [&](V& in) { return ops::cross_entropy(ops::linear(in[0], in[1]), targets, denominator); };
    V in{x, w};
    const float want = unfused(in).item();
    CHECK(fused(in).item() == doctest::Approx(want).epsilon(1e-6));
    const Tensor seed = Tensor::full({}, 1.7f);  // an upstream gradient other than 1 scales both
    const V got = grad(fused, {x.clone(), w.clone()}, seed), ref = grad(unfused, {x.clone(), w.clone()}, seed);
    for (int k = 0; k < 2; ++k) {
      for (int64_t i = 0; i < got[k].numel(); ++i) {
        CHECK(got[k].data()[i] == doctest::Approx(ref[k].data()[i]).epsilon(1e-5).scale(1e-6));
      }
    }
    gradcheck(fused, {x, w});
  }
  // Rows with ignored targets count nothing: their gradient rows are zero.
  const V g = grad([&](V& in) { return ops::linear_cross_entropy(in[0], in[1], targets, 0.0, small); },
                   {x.clone(), w.clone()}, Tensor::full({}, 1.0f));
  for (int64_t d = 0; d < D; ++d) CHECK(g[0].data()[2 * D + d] == 0.0f);
  // Every target ignored: a zero loss (the denominator is at least 1), zero gradients.
  const std::vector<int32_t> none(R, ops::kIgnoreIndex);
  const V z = grad([&](V& in) { return ops::linear_cross_entropy(in[0], in[1], none, 0.0, small); },
                   {x.clone(), w.clone()}, Tensor::full({}, 1.0f));
  CHECK(ops::linear_cross_entropy(x, w, none, 0.0, small).item() == 0.0f);
  for (const Tensor& t : z) CHECK(std::all_of(t.span().begin(), t.span().end(), [](float v) { return v == 0.0f; }));
  // Zero weights: uniform logits, the loss is ln V.
  CHECK(ops::linear_cross_entropy(x, Tensor::zeros({Vv, D}), targets, 0.0, small).item() ==
        doctest::Approx(std::log(static_cast<double>(Vv))).epsilon(1e-6));
}

TEST_CASE("linear_cross_entropy keeps no logits: its peak is a chunk, not R x V") {
  const int64_t R = 256, D = 16, Vv = 1000;
  const Tensor x = random_tensor({R, D}, 1).set_requires_grad(true);
  const Tensor w = random_tensor({Vv, D}, 2).set_requires_grad(true);
  const std::vector<int32_t> targets(R, 7);
  const int64_t chunk = 64 * 1024;  // 16 rows (forward) or 64 columns (backward) of logits
  ops::LinearCrossEntropyOptions small;
  small.chunk_bytes = chunk;
  MemoryTracker::reset_peaks();
  const int64_t before = MemoryTracker::live_total();
  ops::linear_cross_entropy(x, w, targets, 0.0, small).backward();
  const int64_t peak = MemoryTracker::peak_total() - before;
  // Beyond a chunk (and a converted or freed one meeting it): the gradients, R D + V D floats.
  CHECK(peak <= 2 * chunk + (R * D + Vv * D) * 4);
  CHECK(peak < R * Vv * 4);  // the unfused ops hold R x V logits, softmax and gradient
  CHECK(ops::linear_cross_entropy_saves_memory(R, Vv, chunk));
  CHECK_FALSE(ops::linear_cross_entropy_saves_memory(R, Vv));
}

TEST_CASE("merge_row_statistics: shards' log-sum-exp statistics merge into the whole vocabulary's") {
  // Two rows over a vocabulary of 5, split 3 + 2; row 0's target (2) is in shard 0, row 1's (4) in shard 1.
  const float z[2][5] = {{0.5f, -1.0f, 2.0f, 0.25f, 1.5f}, {3.0f, 0.0f, -2.0f, 1.0f, 4.0f}};
  const int32_t target[2] = {2, 4};
  std::vector<float> gathered(2 * 6, 0.0f);
  for (int shard = 0; shard < 2; ++shard) {
    const int first = shard * 3, n = shard == 0 ? 3 : 2;
    float* s = gathered.data() + shard * 6;
    for (int r = 0; r < 2; ++r) {
      float m = z[r][first];
      for (int j = 1; j < n; ++j) m = std::max(m, z[r][first + j]);
      for (int j = 0; j < n; ++j) s[2 + r] += std::exp(z[r][first + j] - m);
      s[r] = m;
      if (target[r] >= first && target[r] < first + n) s[4 + r] = z[r][target[r]];
    }
  }
  std::vector<float> merged(6);
  ops::merge_row_statistics(gathered, 2, merged);
  for (int r = 0; r < 2; ++r) {
    double m = z[r][0], sum = 0;
    for (int j = 1; j < 5; ++j) m = std::max<double>(m, z[r][j]);
    for (int j = 0; j < 5; ++j) sum += std::exp(z[r][j] - m);
    CHECK(merged[r] == doctest::Approx(m));
    CHECK(merged[2 + r] == doctest::Approx(sum).epsilon(1e-6));
    CHECK(merged[4 + r] == z[r][target[r]]);
  }
}

TEST_CASE("parallel_chunks visits every element once, split over the threads only past the limit") {
  for (const int threads : {1, 2, 3}) {
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4096}, int64_t{100003}}) {
      CAPTURE(threads);
      CAPTURE(n);
      const int previous = omp_get_max_threads();
      omp_set_num_threads(threads);
      std::vector<int> visits(static_cast<size_t>(n), 0);
      std::vector<int> callers;  // threads that ran a chunk
      std::mutex lock;
      shardlab::ops::parallel_chunks(n, 4096, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) ++visits[static_cast<size_t>(i)];
        const std::lock_guard<std::mutex> guard(lock);
        callers.push_back(omp_get_thread_num());
      });
      omp_set_num_threads(previous);
      CHECK(std::count(visits.begin(), visits.end(), 1) == n);
      CHECK(static_cast<int>(callers.size()) == (n > 4096 ? threads : 1));
    }
  }
}
