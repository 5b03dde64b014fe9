#include "framework/ops/matmul.h"

#include <algorithm>
#include <atomic>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/compute_copies.h"
#include "framework/ops/matvec.h"

namespace shardlab {
namespace {

using dnnl::memory;

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
};

Engine& cpu() {
  static Engine e;
  return e;
}

memory::desc desc_of(const MatView& v, memory::data_type type = memory::data_type::f32) {
  return memory::desc(memory::dims(v.dims.begin(), v.dims.end()), type,
                      memory::dims(v.strides.begin(), v.strides.end()));
}

std::string key_of(memory::data_type type, const MatView& a, const MatView& b, const MatView& c, const MatmulFlags& f) {
  std::string k;
  k.reserve(160);
  k += type == memory::data_type::bf16 ? "bf16:" : "f32:";
  for (const MatView* v : {&a, &b, &c}) {
    for (int i = 0; i < 4; ++i) k += std::to_string(v->dims[i]) + ',' + std::to_string(v->strides[i]) + ';';
  }
  k += std::to_string(f.alpha) + (f.accumulate ? "+" : "=") + (f.bias ? "b" : "");
  return k;
}

struct CachedMatmul {
  dnnl::matmul primitive;
  memory::desc a, b, c, bias;
  memory::desc scratchpad;  // with a user scratchpad only
};

std::unordered_map<std::string, CachedMatmul>& cache() {
  static std::unordered_map<std::string, CachedMatmul> c;
  return c;
}

int64_t g_created = 0;

}  // namespace

MatView MatView::matrix(int64_t rows, int64_t cols, int64_t ld, bool trans) {
  MatView v;
  v.dims = {1, 1, rows, cols};
  // A transposed [rows, cols] view of a row-major [cols, rows] buffer.
  v.strides = trans ? std::array<int64_t, 4>{0, 0, 1, ld} : std::array<int64_t, 4>{0, 0, ld, 1};
  v.strides[0] = v.strides[1] = rows * cols;
  return v;
}

MatView MatView::batched(std::array<int64_t, 4> dims, std::array<int64_t, 4> strides) {
  MatView v;
  v.dims = dims;
  v.strides = strides;
  return v;
}

namespace {

// The cached primitive for these operands. `user_scratchpad`: the caller passes the
// primitive's scratchpad (a thread of a split call, below, which runs beside its siblings).
const CachedMatmul& primitive_for(memory::data_type type, const MatView& av, const MatView& bv, const MatView& cv,
                                  const MatmulFlags& flags, bool user_scratchpad) {
  std::string key = key_of(type, av, bv, cv, flags);
  if (user_scratchpad) key += 'u';
  auto it = cache().find(key);
  if (it == cache().end()) {
    CachedMatmul m;
    m.a = desc_of(av, type);
    m.b = desc_of(bv, type);
    m.c = desc_of(cv);
    dnnl::primitive_attr attr;
    if (flags.alpha != 1.0f) attr.set_output_scales(0, {flags.alpha});
    if (flags.accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    if (user_scratchpad) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (flags.bias) {
      m.bias = memory::desc({1, 1, 1, cv.cols()}, memory::data_type::f32, memory::format_tag::abcd);
    }
    auto d = flags.bias ? dnnl::matmul::desc(m.a, m.b, m.bias, m.c) : dnnl::matmul::desc(m.a, m.b, m.c);
    const dnnl::matmul::primitive_desc pd(d, attr, cpu().engine);
    m.primitive = dnnl::matmul(pd);
    if (user_scratchpad) m.scratchpad = pd.scratchpad_desc();
    ++g_created;
    it = cache().emplace(std::move(key), std::move(m)).first;
  }
  return it->second;
}

// Runs `m` on this thread's stream. A primitive with a user scratchpad gets this thread's.
void execute(const CachedMatmul& m, const void* a, const void* b, float* c, const float* bias) {
  thread_local dnnl::stream stream{cpu().engine};
  thread_local std::vector<char> scratchpad;  // 64 bytes over, to align its start
  const dnnl::engine& engine = cpu().engine;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(m.a, engine, const_cast<void*>(a))},
                                       {DNNL_ARG_WEIGHTS, memory(m.b, engine, const_cast<void*>(b))},
                                       {DNNL_ARG_DST, memory(m.c, engine, c)}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, memory(m.bias, engine, const_cast<float*>(bias)));
  if (const size_t bytes = m.scratchpad.get_size(); bytes > 0) {
    if (scratchpad.size() < bytes + 64) scratchpad.resize(bytes + 64);
    const auto at = reinterpret_cast<uintptr_t>(scratchpad.data());
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(m.scratchpad, engine, reinterpret_cast<void*>((at + 63) / 64 * 64)));
  }
  m.primitive.execute(stream, args);
  stream.wait();
}

// A large 2-d matmul runs as one oneDNN call per thread, each on its own share: a block of
// C's rows, or, where the reduction is longer than C has rows (a weight gradient, summed
// over the tokens), a slice of the reduction whose partial products are then added in
// thread order. oneDNN's own partition of these matmuls over the threads measured slower:
// gpt-bench's linear layers on 2 threads, 2048 tokens, took 7-11% less time split so
// (bf16 and fp32 forward and input gradient by rows, the bf16 weight gradients by reduction);
// `bench_train_step --matmul-split off` measures the step without it. Inside a thread oneDNN runs single-threaded (it does not
// nest OpenMP), so every call gets its own scratchpad and stream (execute).
enum class Split { kNone, kRows, kReduction };
std::atomic<bool> g_thread_split{true};
std::atomic<int64_t> g_split_matmuls{0};
constexpr int64_t kMinShare = 256;  // rows (or reduction) per thread below which oneDNN partitions

Split split_of(const MatView& av, const MatView& cv, int threads) {
  if (!g_thread_split.load(std::memory_order_relaxed) || threads < 2 || omp_in_parallel() || av.dims[0] * av.dims[1] != 1) return Split::kNone;
  const int64_t rows = cv.rows(), reduction = av.cols();
  if (cv.cols() < 64 || std::min(rows, reduction) < 64) return Split::kNone;
  if (rows >= reduction && rows >= threads * kMinShare) return Split::kRows;
  if (reduction > rows && reduction >= threads * kMinShare) return Split::kReduction;
  return Split::kNone;
}

// A thread's share of a view (no batch dims): another number of rows or columns. The batch
// strides follow the new size, as for a view made so: oneDNN's brgemm kernels take only
// views whose strides a dense layout could have, and fall back to a slower GEMM otherwise.
MatView share_of(MatView v, int64_t rows, int64_t cols) {
  v.dims[2] = rows;
  v.dims[3] = cols;
  v.strides[0] = v.strides[1] = std::max(rows * v.strides[2], cols * v.strides[3]);
  return v;
}
MatView with_rows(const MatView& v, int64_t rows) { return share_of(v, rows, v.cols()); }
MatView with_cols(const MatView& v, int64_t cols) { return share_of(v, v.rows(), cols); }

void run_split(Split split, memory::data_type type, const char* a, const MatView& av, const char* b,
               const MatView& bv, float* c, const MatView& cv, MatmulFlags flags, const float* bias, int threads) {
  const size_t elem = type == memory::data_type::bf16 ? 2 : 4;
  const int64_t total = split == Split::kRows ? cv.rows() : av.cols();
  const int64_t share = (total + threads - 1) / threads, last = total - share * (threads - 1);
  if (split == Split::kRows) {  // thread t: C[rows_t] = A[rows_t] · B
    const CachedMatmul* m[2] = {&primitive_for(type, with_rows(av, share), bv, with_rows(cv, share), flags, true),
                                &primitive_for(type, with_rows(av, last), bv, with_rows(cv, last), flags, true)};
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      const int64_t r0 = t * share;
      execute(*m[t + 1 < threads ? 0 : 1], a + r0 * av.strides[2] * elem, b, c + r0 * cv.strides[2], bias);
    }
    return;
  }
  // Thread t: its slice of the reduction; thread 0 into C with the caller's flags, the others
  // into dense partial products, added to C afterwards in thread order (deterministic).
  const int64_t R = cv.rows(), N = cv.cols();
  const MatView dense = MatView::matrix(R, N, N);
  MatmulFlags partial_flags{.alpha = flags.alpha};
  const CachedMatmul* first = &primitive_for(type, with_cols(av, share), with_rows(bv, share), cv, flags, true);
  const CachedMatmul* middle = &primitive_for(type, with_cols(av, share), with_rows(bv, share), dense, partial_flags, true);
  const CachedMatmul* tail = &primitive_for(type, with_cols(av, last), with_rows(bv, last), dense, partial_flags, true);
  thread_local std::vector<float> partials;
  partials.resize(static_cast<size_t>((threads - 1) * R * N));
  float* parts = partials.data();
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const int64_t k0 = t * share;
    const char* at = a + k0 * av.strides[3] * elem;
    const char* bt = b + k0 * bv.strides[2] * elem;
    if (t == 0) {
      execute(*first, at, bt, c, bias);
    } else {
      execute(t + 1 < threads ? *middle : *tail, at, bt, parts + (t - 1) * R * N, nullptr);
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t i = 0; i < R; ++i) {
      float* row = c + i * cv.strides[2];
      for (int u = 1; u < threads; ++u) {
        const float* p = parts + ((u - 1) * R + i) * N;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j) row[j * cv.strides[3]] += p[j];
      }
    }
  }
}

// A and B in `type` (f32 or bf16); C and the bias always f32.
void run_matmul(memory::data_type type, const void* a, const MatView& av, const void* b, const MatView& bv, float* c,
                const MatView& cv, MatmulFlags flags, const float* bias) {
  SL_ASSERT(av.cols() == bv.rows() && av.rows() == cv.rows() && bv.cols() == cv.cols(),
            "matmul inner/outer dims disagree");
  const int threads = omp_get_max_threads();
  if (const Split split = split_of(av, cv, threads); split != Split::kNone) {
    g_split_matmuls.fetch_add(1, std::memory_order_relaxed);
    run_split(split, type, static_cast<const char*>(a), av, static_cast<const char*>(b), bv, c, cv, flags,
              flags.bias ? bias : nullptr, threads);
    return;
  }
  execute(primitive_for(type, av, bv, cv, flags, false), a, b, c, flags.bias ? bias : nullptr);
}

std::atomic<int64_t> g_bf16_matmuls[2] = {0, 0};

}  // namespace

void matmul_raw(const float* a, const MatView& av, const float* b, const MatView& bv, float* c, const MatView& cv,
                MatmulFlags flags, const float* bias) {
  run_matmul(memory::data_type::f32, a, av, b, bv, c, cv, flags, bias);
}

void matmul_raw(const Bf16* a, const MatView& av, const Bf16* b, const MatView& bv, float* c, const MatView& cv,
                MatmulFlags flags, const float* bias) {
  run_matmul(memory::data_type::bf16, a, av, b, bv, c, cv, flags, bias);
}

int64_t bf16_matmuls(Bf16Matmul path) { return g_bf16_matmuls[static_cast<int>(path)].load(); }

MatmulOperand::MatmulOperand(const Tensor& x, const ComputePrecision& precision) {
  if (const MatmulOperand* copy = ComputeCopies::find(x, precision)) {  // a weight converted once
    *this = *copy;
  } else if (!precision.bf16()) {
    f32_ = x;
  } else if (precision.matmul == Bf16Matmul::kNative) {
    bf16_ = Bf16Array::of(x.data(), x.numel());
  } else {
    f32_ = rounded_to_bf16(x);
    rounded_ = true;
  }
}

MatmulOperand MatmulOperand::allocate(int64_t n, const ComputePrecision& precision) {
  MatmulOperand operand;
  if (precision.bf16() && precision.matmul == Bf16Matmul::kNative) {
    operand.bf16_ = Bf16Array(n);
  } else {
    operand.f32_ = Tensor::empty({n});
    operand.rounded_ = precision.bf16();
  }
  return operand;
}

void matmul_raw(const MatmulOperand& a, int64_t a_offset, const MatView& av, const MatmulOperand& b, int64_t b_offset,
                const MatView& bv, float* c, const MatView& cv, MatmulFlags flags, const float* bias) {
  SL_ASSERT(a.bf16_.defined() == b.bf16_.defined() && a.rounded_ == b.rounded_,
            "matmul operands of different precisions");
  if (a.bf16_.defined()) {
    g_bf16_matmuls[static_cast<int>(Bf16Matmul::kNative)].fetch_add(1, std::memory_order_relaxed);
    matmul_raw(a.bf16_.data() + a_offset, av, b.bf16_.data() + b_offset, bv, c, cv, flags, bias);
  } else {
    if (a.rounded_) g_bf16_matmuls[static_cast<int>(Bf16Matmul::kRounded)].fetch_add(1, std::memory_order_relaxed);
    matmul_raw(a.f32_.data() + a_offset, av, b.f32_.data() + b_offset, bv, c, cv, flags, bias);
  }
}

int64_t matmul_primitives_created() { return g_created; }

void set_matmul_thread_split(bool on) { g_thread_split.store(on, std::memory_order_relaxed); }

int64_t thread_split_matmuls() { return g_split_matmuls.load(std::memory_order_relaxed); }

namespace {
std::atomic<int64_t> g_linear_forwards{0};
}  // namespace

int64_t linear_forwards() { return g_linear_forwards.load(std::memory_order_relaxed); }

namespace ops {

namespace {

void check_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  SL_ASSERT(w.ndim() == 2 && x.dim(-1) == w.dim(1),
            "linear: x " + shape_str(x.shape()) + " with weight " + shape_str(w.shape()));
  SL_ASSERT(!b.defined() || (b.ndim() == 1 && b.dim(0) == w.dim(0)), "linear: bias shape");
}

// Records linear's backward on its output y. Backward keeps x as the forward multiplied it
// (`xs`: x itself in fp32, its bf16 copy under bf16), never x's fp32 values beside a copy:
// under bf16 a Linear's saved input takes half the bytes, and backward converts it no more.
Tensor record_linear(const Tensor& x, const MatmulOperand& xs, const Tensor& w, const Tensor& b, Tensor y,
                     const ComputePrecision& precision) {
  const int64_t K = w.dim(1), N = w.dim(0), M = x.numel() / K;
  return record(y, "linear", {x, w, b}, [xs, x_shape = x.shape(), x_grad = x.requires_grad(), w, b, M, N, K,
                                         precision](const Tensor& gy) {
    Tensor gx, gw, gb;
    const MatmulOperand go(gy, precision);
    if (x_grad) {  // gx[M,K] = gy[M,N] · w[N,K]
      gx = Tensor::empty(x_shape);
      matmul_raw(go, 0, MatView::matrix(M, N, N), MatmulOperand(w, precision), 0, MatView::matrix(N, K, K), gx.data(),
                 MatView::matrix(M, K, K));
    }
    const auto weight_grad_of = [=](const MatmulOperand& g_y) {  // gw[N,K] = gy^T[N,M] · x[M,K]
      Tensor g = Tensor::empty(w.shape());
      matmul_raw(g_y, 0, MatView::matrix(N, M, N, true), xs, 0, MatView::matrix(M, K, K), g.data(),
                 MatView::matrix(N, K, K));
      return g;
    };
    // Deferred, it converts gy again when it runs rather than keep a converted copy waiting.
    const auto weight_grad = [=] { return weight_grad_of(MatmulOperand(gy, precision)); };
    const auto bias_grad = [=] {  // gb[N] = column sums of gy (fp32)
      // Threads own column slices, and each column is summed in row order: deterministic.
      Tensor g = Tensor::zeros(b.shape());
      const float* in = gy.data();
      float* o = g.data();
      constexpr int64_t kSlice = 64;
#pragma omp parallel for if (M * N > 65536)
      for (int64_t j0 = 0; j0 < N; j0 += kSlice) {
        const int64_t j1 = std::min(N, j0 + kSlice);
        for (int64_t i = 0; i < M; ++i) {
#pragma omp simd
          for (int64_t j = j0; j < j1; ++j) o[j] += in[i * N + j];
        }
      }
      return g;
    };
    // A zero-bubble pipeline's input-gradient pass leaves the weight's for later.
    if (w.requires_grad() && !defer_gradient(w, weight_grad)) gw = weight_grad_of(go);
    if (b.defined() && b.requires_grad() && !defer_gradient(b, bias_grad)) gb = bias_grad();
    return std::vector<Tensor>{gx, gw, gb};
  });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_linear(x, w, b);
  const int64_t K = w.dim(1), N = w.dim(0), M = x.numel() / K;
  Shape out_shape = x.shape();
  out_shape.back() = N;
  Tensor y = Tensor::empty(out_shape);
  const ComputePrecision precision = compute_precision();
  const Tensor bias = compute_value(b);
  const MatvecPanels* panels = M <= kMatvecPanelsMaxRows ? ComputeCopies::find_panels(w, precision) : nullptr;
  const bool gemm = panels == nullptr && (precision.bf16() || M > kMatvecMaxRows);
  // x as the GEMM multiplies it and backward keeps it; a decode step without autograd
  // needs neither (under bf16 that saves converting x on every call).
  const MatmulOperand xs = gemm || needs_grad({&x, &w, &b}) ? MatmulOperand(x, precision) : MatmulOperand();
  if (panels != nullptr) {  // a decode step's rows (or a short prefill's), the weight laid out for them
    panels->multiply(x.data(), b.defined() ? bias.data() : nullptr, y.data(), M);
  } else if (!gemm) {  // a few fp32 rows: stream the weight once
    matvec(x.data(), w.data(), b.defined() ? bias.data() : nullptr, y.data(), M, N, K);
  } else {
    matmul_raw(xs, 0, MatView::matrix(M, K, K), MatmulOperand(w, precision), 0, MatView::matrix(K, N, K, /*trans=*/true),
               y.data(), MatView::matrix(M, N, N), {.bias = b.defined()}, b.defined() ? bias.data() : nullptr);
  }
  g_linear_forwards.fetch_add(1, std::memory_order_relaxed);
  return record_linear(x, xs, w, b, y, precision);
}

Tensor linear_with_output(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  return linear_with_output(x, needs_grad({&x, &w, &b}) ? MatmulOperand(x, compute_precision()) : MatmulOperand(), w, b,
                            y);
}

Tensor linear_with_output(const Tensor& x, const MatmulOperand& xs, const Tensor& w, const Tensor& b, const Tensor& y) {
  check_linear(x, w, b);
  SL_ASSERT(y.numel() == x.numel() / w.dim(1) * w.dim(0), "linear_with_output: output " + shape_str(y.shape()) +
                                                              " does not match x " + shape_str(x.shape()) + " and weight " +
                                                              shape_str(w.shape()));
  return record_linear(x, xs, w, b, y.detach(), compute_precision());
}

Tensor batched_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  SL_ASSERT(x.ndim() == 3 && w.ndim() == 3 && x.dim(0) == w.dim(0) && x.dim(2) == w.dim(2),
            "batched_linear: x " + shape_str(x.shape()) + " with weights " + shape_str(w.shape()));
  SL_ASSERT(!b.defined() || (b.ndim() == 2 && b.dim(0) == w.dim(0) && b.dim(1) == w.dim(1)),
            "batched_linear: bias " + shape_str(b.shape()) + " for weights " + shape_str(w.shape()));
  const int64_t G = x.dim(0), M = x.dim(1), K = x.dim(2), N = w.dim(1);
  // [1, G, rows, cols] views, row-major or transposed.
  auto view = [G](int64_t rows, int64_t cols, bool trans) {
    return MatView::batched({1, G, rows, cols}, {G * rows * cols, rows * cols, trans ? 1 : cols, trans ? rows : 1});
  };
  Tensor y = Tensor::empty({G, M, N});
  const ComputePrecision precision = compute_precision();
  const MatmulOperand xs(x, precision);  // kept for backward as multiplied (record_linear says why)
  matmul_raw(xs, 0, view(M, K, false), MatmulOperand(w, precision), 0, view(K, N, true), y.data(), view(M, N, false));
  if (b.defined()) {
    const Tensor bc = compute_value(b);
    for (int64_t g = 0; g < G; ++g) {
      const float* bias = bc.data() + g * N;
      for (int64_t m = 0; m < M; ++m) {
        float* row = y.data() + (g * M + m) * N;
#pragma omp simd
        for (int64_t n = 0; n < N; ++n) row[n] += bias[n];
      }
    }
  }
  return record(y, "batched_linear", {x, w, b}, [xs, x_shape = x.shape(), x_grad = x.requires_grad(), w, b, G, M, N, K,
                                                 view, precision](const Tensor& gy) {
    Tensor gx, gw, gb;
    const MatmulOperand go(gy, precision);
    if (x_grad) {  // gx[g] = gy[g] · w[g]
      gx = Tensor::empty(x_shape);
      matmul_raw(go, 0, view(M, N, false), MatmulOperand(w, precision), 0, view(N, K, false), gx.data(),
                 view(M, K, false));
    }
    if (w.requires_grad()) {  // gw[g] = gy[g]^T · x[g]
      gw = Tensor::empty(w.shape());
      matmul_raw(go, 0, view(N, M, true), xs, 0, view(M, K, false), gw.data(), view(N, K, false));
    }
    if (b.defined() && b.requires_grad()) {  // gb[g] = column sums of gy[g]
      gb = Tensor::zeros(b.shape());
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t m = 0; m < M; ++m) {
          const float* row = gy.data() + (g * M + m) * N;
          float* o = gb.data() + g * N;
#pragma omp simd
          for (int64_t n = 0; n < N; ++n) o[n] += row[n];
        }
      }
    }
    return std::vector<Tensor>{gx, gw, gb};
  });
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  SL_ASSERT(a.ndim() == b.ndim() && a.ndim() >= 2 && a.ndim() <= 4 && a.dim(-1) == b.dim(-2),
            "matmul: " + shape_str(a.shape()) + " x " + shape_str(b.shape()));
  for (int i = 0; i + 2 < a.ndim(); ++i) {
    SL_ASSERT(a.dim(i) == b.dim(i), "matmul batch dims: " + shape_str(a.shape()) + " x " + shape_str(b.shape()));
  }
  const int64_t M = a.dim(-2), K = a.dim(-1), N = b.dim(-1);
  const int64_t batch = a.numel() / (M * K);
  Shape out_shape = a.shape();
  out_shape.back() = N;
  Tensor c = Tensor::empty(out_shape);
  // Views as [1, batch, rows, cols] with the given per-matrix transposition.
  auto view = [batch](int64_t rows, int64_t cols, bool trans) {
    return MatView::batched({1, batch, rows, cols}, {batch * rows * cols, rows * cols, trans ? 1 : cols, trans ? rows : 1});
  };
  const ComputePrecision precision = compute_precision();
  const MatmulOperand as(a, precision), bs(b, precision);  // kept for backward as multiplied
  matmul_raw(as, 0, view(M, K, false), bs, 0, view(K, N, false), c.data(), view(M, N, false));
  return record(c, "matmul", {a, b}, [as, bs, a_shape = a.shape(), b_shape = b.shape(), a_grad = a.requires_grad(),
                                      b_grad = b.requires_grad(), M, N, K, view, precision](const Tensor& gc) {
    Tensor ga, gb;
    const MatmulOperand go(gc, precision);
    if (a_grad) {  // ga[M,K] = gc[M,N] · b^T[N,K]
      ga = Tensor::empty(a_shape);
      matmul_raw(go, 0, view(M, N, false), bs, 0, view(N, K, true), ga.data(), view(M, K, false));
    }
    if (b_grad) {  // gb[K,N] = a^T[K,M] · gc[M,N]
      gb = Tensor::empty(b_shape);
      matmul_raw(as, 0, view(K, M, true), go, 0, view(M, N, false), gb.data(), view(K, N, false));
    }
    return std::vector<Tensor>{ga, gb};
  });
}

}  // namespace ops
}  // namespace shardlab
