#include "framework/ops/gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/error.h"

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
// (bf16 and fp32 forward and input gradient by rows, the bf16 weight gradients by
// reduction); `bench_train_step --matmul-split off` measures the step without it. Inside a
// thread oneDNN runs single-threaded (it does not nest OpenMP), so every call gets its own
// scratchpad and stream (execute).
enum class Split { kNone, kRows, kReduction };
std::atomic<bool> g_thread_split{true};
std::atomic<int64_t> g_split_matmuls{0};
constexpr int64_t kMinShare = 256;  // rows (or reduction) per thread below which oneDNN partitions
// A reduction split holds a partial C per thread but the first: beyond this (many threads,
// a large C) the memory and the summing cost more than the split saves, and oneDNN partitions.
constexpr int64_t kMaxPartialBytes = int64_t{16} << 20;

Split split_of(const MatView& av, const MatView& cv, int threads) {
  if (!g_thread_split.load(std::memory_order_relaxed) || threads < 2 || omp_in_parallel() ||
      av.dims[0] * av.dims[1] != 1) {
    return Split::kNone;
  }
  const int64_t rows = cv.rows(), reduction = av.cols();
  if (cv.cols() < 64 || std::min(rows, reduction) < 64) return Split::kNone;
  if (rows >= reduction && rows >= threads * kMinShare) return Split::kRows;
  const int64_t partial_bytes = (threads - 1) * rows * cv.cols() * static_cast<int64_t>(sizeof(float));
  if (reduction > rows && reduction >= threads * kMinShare && partial_bytes <= kMaxPartialBytes) {
    return Split::kReduction;
  }
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
  const CachedMatmul* middle =  // threads 1 .. threads - 2
      threads > 2 ? &primitive_for(type, with_cols(av, share), with_rows(bv, share), dense, partial_flags, true)
                  : nullptr;
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

}  // namespace

void matmul_raw(const float* a, const MatView& av, const float* b, const MatView& bv, float* c, const MatView& cv,
                MatmulFlags flags, const float* bias) {
  run_matmul(memory::data_type::f32, a, av, b, bv, c, cv, flags, bias);
}

void matmul_raw(const Bf16* a, const MatView& av, const Bf16* b, const MatView& bv, float* c, const MatView& cv,
                MatmulFlags flags, const float* bias) {
  run_matmul(memory::data_type::bf16, a, av, b, bv, c, cv, flags, bias);
}

int64_t matmul_primitives_created() { return g_created; }

void set_matmul_thread_split(bool on) { g_thread_split.store(on, std::memory_order_relaxed); }

int64_t thread_split_matmuls() { return g_split_matmuls.load(std::memory_order_relaxed); }

}  // namespace shardlab
