#include "parallel/context/context_parallel.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <utility>

#include "framework/autograd.h"
#include "framework/error.h"
#include "parallel/comm/collectives.h"

namespace shardlab::parallel {
namespace {

using ops::AttentionHeads;
using ops::PositionSpan;
using Spans = std::vector<PositionSpan>;

// Where an attention's time goes (ContextTimes), when someone keeps count.
class AttentionClock {
 public:
  explicit AttentionClock(std::shared_ptr<ContextTimes> times) : times_(std::move(times)) {}
  template <typename F>
  void compute(F&& f) const { timed(&ContextTimes::compute_seconds, f); }
  template <typename F>
  void exposed(F&& f) const { timed(&ContextTimes::exposed_comm_seconds, f); }

 private:
  template <typename F>
  void timed(double ContextTimes::*into, F& f) const {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    if (times_) (*times_).*into += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::shared_ptr<ContextTimes> times_;
};

void add_into(Tensor& into, const Tensor& x) {
  float* out = into.data();
  const float* in = x.data();
#pragma omp simd
  for (int64_t i = 0; i < into.numel(); ++i) out[i] += in[i];
}

std::span<const float> values(const Tensor& t) { return {t.data(), static_cast<size_t>(t.numel())}; }
std::span<float> values(Tensor& t) { return {t.data(), static_cast<size_t>(t.numel())}; }

// A key/value block on its way from this rank to the next of the ring, and the previous
// rank's on its way here, in the wire dtype: bf16 values travel two to a float (half
// the bytes) and are widened on arrival.
class BlockPass {
 public:
  BlockPass() = default;  // nothing in flight
  BlockPass(const AxisGroup& axis, const Tensor& block, DType wire) : arrived_(Tensor::empty(block.shape())) {
    if (wire == DType::kF32) {
      handle_ = ppermute_async(axis, values(block), values(arrived_), 1);
      return;
    }
    const int64_t n = block.numel();
    SL_ASSERT(n % 2 == 0, "a bf16 K/V block of " + std::to_string(n) + " values: an even count travels");
    sent_ = Bf16Array::of(block.data(), n);
    received_ = Bf16Array(n);
    handle_ = ppermute_async(axis, {reinterpret_cast<const float*>(sent_.data()), static_cast<size_t>(n / 2)},
                             {reinterpret_cast<float*>(received_.data()), static_cast<size_t>(n / 2)}, 1);
  }
  void wait() { handle_.wait(); }
  // The previous rank's block (after wait()).
  Tensor arrived() {
    if (received_.defined()) received_.to_float(arrived_.data()), received_ = Bf16Array();
    return arrived_;
  }

 private:
  CollectiveHandle handle_;
  Tensor arrived_;
  Bf16Array sent_, received_;
};

// Every rank's spans for a local length, by coordinate on the axis.
std::vector<Spans> spans_by_rank(const SequenceSplit& split, int64_t local) {
  std::vector<Spans> out;
  for (int r = 0; r < split.size; ++r) out.push_back(split.spans(r, local));
  return out;
}

// The ring: c steps, each attending to the key/value block in hand while the next one
// arrives from the previous rank (ppermute by +1). Rank r holds rank (r - s)'s block at step s.
Tensor ring_attention(const AxisGroup& axis, const SequenceSplit& split, DType wire, const Tensor& qkv, int n_heads,
                      int n_kv_heads, const AttentionClock& clock) {
  const AttentionHeads h = AttentionHeads::of(qkv, n_heads, n_kv_heads);
  const int c = axis.size(), me = axis.rank();
  const std::vector<Spans> spans = spans_by_rank(split, qkv.dim(1));
  const auto owner = [c, me](int step) { return ((me - step) % c + c) % c; };
  const Tensor kv = ops::key_values(qkv, h);
  ops::OnlineAttention attention(h, qkv);
  Tensor block = kv;
  for (int s = 0; s < c; ++s) {
    BlockPass pass;
    if (s + 1 < c) pass = BlockPass(axis, block, wire);
    clock.compute([&] { attention.attend(spans[me], block, spans[owner(s)]); });
    clock.exposed([&] { pass.wait(); });
    if (s + 1 < c) block = pass.arrived();
  }
  Tensor y;
  clock.compute([&] { y = attention.finish(); });
  const Tensor lse = attention.log_sum_exp();
  const ComputePrecision precision = compute_precision();
  return record(y, "ring_attention", {qkv}, [=, &axis](const Tensor& gy) {
    const PrecisionScope scope(precision);
    std::optional<ops::BlockAttentionBackward> backward;
    clock.compute([&] { backward.emplace(h, qkv, y, lse, gy); });
    Tensor gqkv = Tensor::zeros(qkv.shape());
    // Step s: this rank's share of the gradient of the block in hand is computed while the
    // block moves on and while the gradient the earlier ranks summed for it arrives; the sum
    // then follows the block, overlapping the next step. After c steps it is home.
    Tensor block = kv, travelling = Tensor::zeros(kv.shape()), arriving = Tensor::empty(kv.shape());
    CollectiveHandle gradient_pass;  // the gradient of the block in hand, on its way here
    for (int s = 0; s < c; ++s) {
      Tensor share = Tensor::zeros(kv.shape());
      BlockPass pass;
      if (s + 1 < c) pass = BlockPass(axis, block, wire);
      clock.compute([&] {
        backward->block(spans[me], block, spans[owner(s)], gqkv, share);
      });
      clock.exposed([&] {
        gradient_pass.wait();
        pass.wait();
      });
      clock.compute([&] {
        if (s > 0) add_into(share, arriving);  // what the earlier ranks summed
      });
      travelling = share;
      arriving = Tensor::empty(kv.shape());
      gradient_pass = ppermute_async(axis, values(travelling), values(arriving), 1);
      if (s + 1 < c) block = pass.arrived();
    }
    clock.exposed([&] { gradient_pass.wait(); });  // this rank's own block's, home
    const Tensor grad = arriving;
    ops::add_key_value_grad(grad, h, gqkv);
    return std::vector<Tensor>{gqkv};
  });
}

// All-gather: every rank's key/value block at once, attended to in one pass; backward
// sums each block's gradient on its owner with one reduce_scatter.
Tensor allgather_attention(const AxisGroup& axis, const SequenceSplit& split, DType wire, const Tensor& qkv,
                           int n_heads, int n_kv_heads, const AttentionClock& clock) {
  const AttentionHeads h = AttentionHeads::of(qkv, n_heads, n_kv_heads);
  const int c = axis.size(), me = axis.rank();
  const std::vector<Spans> spans = spans_by_rank(split, qkv.dim(1));
  const Tensor kv = ops::key_values(qkv, h);
  Tensor all = Tensor::empty({c * h.B, qkv.dim(1), h.kv_width()});  // rank r's block: rows [r B, (r+1) B)
  clock.exposed([&] {
    if (wire == DType::kF32) return all_gather(axis, values(kv), values(all));
    const Bf16Array mine = Bf16Array::of(kv.data(), kv.numel()), every(all.numel());
    all_gather(axis, std::span<const Bf16>(mine.data(), kv.numel()), std::span<Bf16>(every.data(), all.numel()));
    every.to_float(all.data());
  });
  ops::OnlineAttention attention(h, qkv);
  Tensor y;
  clock.compute([&] {
    for (int r = 0; r < c; ++r) attention.attend(spans[me], all.rows(r * h.B, h.B), spans[r]);
    y = attention.finish();
  });
  const Tensor lse = attention.log_sum_exp();
  const ComputePrecision precision = compute_precision();
  return record(y, "allgather_attention", {qkv}, [=, &axis](const Tensor& gy) {
    const PrecisionScope scope(precision);
    Tensor gqkv = Tensor::zeros(qkv.shape()), grads = Tensor::zeros(all.shape());
    clock.compute([&] {
      const ops::BlockAttentionBackward backward(h, qkv, y, lse, gy);
      for (int r = 0; r < c; ++r) {
        Tensor grad = grads.rows(r * h.B, h.B);
        backward.block(spans[me], all.rows(r * h.B, h.B), spans[r], gqkv, grad);
      }
    });
    Tensor mine = Tensor::empty(kv.shape());
    clock.exposed([&] { reduce_scatter(axis, values(grads), values(mine)); });
    ops::add_key_value_grad(mine, h, gqkv);
    return std::vector<Tensor>{gqkv};
  });
}

}  // namespace

Tensor context_attention(const AxisGroup& context, const SequenceSplit& split, const ContextParallelConfig& config,
                         const Tensor& qkv, int n_heads, int n_kv_heads, std::shared_ptr<ContextTimes> times) {
  SL_ASSERT(split.size == context.size(), "a sequence split over " + std::to_string(split.size) + " ranks on an axis of " +
                                              std::to_string(context.size()));
  const DType wire = config.kv_dtype;
  const AttentionClock clock(std::move(times));
  return config.comm == ContextComm::kRing
             ? ring_attention(context, split, wire, qkv, n_heads, n_kv_heads, clock)
             : allgather_attention(context, split, wire, qkv, n_heads, n_kv_heads, clock);
}

std::vector<int> SequenceSplit::chunks_of(int rank) const {
  SL_ASSERT(rank >= 0 && rank < size, "context rank " + std::to_string(rank) + " of " + std::to_string(size));
  if (!load_balance) return {rank};
  return {rank, 2 * size - 1 - rank};
}

std::vector<PositionSpan> SequenceSplit::spans(int rank, int64_t local) const {
  const std::vector<int> mine = chunks_of(rank);
  const int64_t n = static_cast<int64_t>(mine.size());
  SL_ASSERT(local % n == 0, "context slice of " + std::to_string(local) + " rows in " + std::to_string(n) + " chunks");
  const int64_t chunk = local / n;
  std::vector<PositionSpan> out;
  for (int64_t i = 0; i < n; ++i) out.push_back({.row = i * chunk, .position = mine[i] * chunk, .length = chunk});
  return out;
}

std::vector<int64_t> SequenceSplit::positions(int rank, int64_t local) const {
  std::vector<int64_t> out;
  for (const PositionSpan& s : spans(rank, local)) {
    for (int64_t i = 0; i < s.length; ++i) out.push_back(s.position + i);
  }
  return out;
}

void SequenceSplit::check_length(int64_t seq_len) const {
  if (seq_len % chunks() == 0) return;
  throw UserError("sequence length " + std::to_string(seq_len) + " does not split into the " + std::to_string(chunks()) +
                  " chunks of context=" + std::to_string(size) +
                  (load_balance ? " with load balancing (2 x context)" : "") +
                  "; choose a sequence length that is a multiple of " + std::to_string(chunks()));
}

data::Batch SequenceSplit::slice(const data::Batch& batch, int rank) const {
  check_length(batch.seq_len);
  const std::vector<int64_t> at = positions(rank, batch.seq_len / size);
  data::Batch out;
  out.rows = batch.rows;
  out.seq_len = static_cast<int64_t>(at.size());
  for (int64_t b = 0; b < batch.rows; ++b) {
    for (const int64_t t : at) {
      out.inputs.push_back(batch.inputs[b * batch.seq_len + t]);
      out.targets.push_back(batch.targets[b * batch.seq_len + t]);
    }
  }
  return out;
}

ContextParallel::ContextParallel(nn::Transformer& model, const AxisGroup& context, const ContextParallelConfig& config)
    : model_(model), context_(context), config_(config),
      split_{.size = context.size(), .load_balance = config.load_balance} {
  auto hooks = std::make_shared<nn::ContextParallelHooks>();
  const SequenceSplit split = split_;
  const int rank = context.rank();
  hooks->positions = [split, rank](int64_t local) { return split.positions(rank, local); };
  const AxisGroup* axis = &context;
  hooks->attention = [axis, split, config, times = times_](const Tensor& qkv, int n, int k) {
    return context_attention(*axis, split, config, qkv, n, k, times);
  };
  hooks_ = std::move(hooks);
  attach();
}

void ContextParallel::attach() const {
  model_.context_parallel = hooks_;
  const AxisGroup* axis = &context_;
  for (const auto& block : model_.blocks) {
    block->attn.context_parallel = hooks_;
    if (!block->moe) continue;
    block->moe->context_fractions = [axis](std::vector<float>& fractions) {  // the mean over the axis
      all_reduce(*axis, fractions);
      for (float& f : fractions) f /= static_cast<float>(axis->size());
    };
  }
}

void ContextParallel::detach() const {
  model_.context_parallel = nullptr;
  for (const auto& block : model_.blocks) {
    block->attn.context_parallel = nullptr;
    if (block->moe) block->moe->context_fractions = nullptr;
  }
}

std::unique_ptr<ContextParallel> apply_context_parallel(nn::Transformer& model, const AxisGroup& context,
                                                        const ContextParallelConfig& config) {
  return std::make_unique<ContextParallel>(model, context, config);
}

void plan_context_parallel_step(StepPlan& plan, const Mesh& mesh, const nn::ModelConfig& c,
                                const ContextParallelConfig& cp, int64_t rows, int64_t seq_len, int microbatches,
                                const std::vector<int64_t>& layers) {
  if (!mesh.splits(kContextAxis)) return;
  std::set<int64_t> moe_layers;
  for (const int64_t l : layers) {
    if (c.is_moe_layer(l)) moe_layers.insert(l);
  }
  const int n = mesh.axis_size(kContextAxis);
  // Under tensor parallelism each rank holds its share of the kv heads (at least one).
  const int t = mesh.size_of(kTensorAxis);
  const int64_t kv_heads = std::max<int64_t>(1, c.n_kv_heads / t);
  const int64_t values = rows * (seq_len / n) * 2 * kv_heads * c.head_dim();
  const int64_t block = values * dtype_bytes(cp.kv_dtype), grad = values * kBytesPerFloat;
  const auto add = [&](CollectiveOp op, int64_t bytes, const std::string& what) {
    add_planned(plan, mesh, {kContextAxis, op, bytes, what});
  };
  const auto forward = [&] {
    if (cp.comm == ContextComm::kAllGather) return add(CollectiveOp::kAllGather, block * n, "k/v");
    for (int s = 0; s + 1 < n; ++s) add(CollectiveOp::kPermute, block, "k/v ring");
  };
  const auto backward = [&] {
    if (cp.comm == ContextComm::kAllGather) return add(CollectiveOp::kReduceScatter, grad * n, "dk/dv");
    for (int s = 0; s < n; ++s) {
      if (s + 1 < n) add(CollectiveOp::kPermute, block, "k/v ring");
      add(CollectiveOp::kPermute, grad, "dk/dv ring");
    }
  };
  // An MoE block's load-balancing shares, averaged over the axis after its attention.
  const auto block_forward = [&](int64_t layer) {
    forward();
    if (moe_layers.contains(layer)) add(CollectiveOp::kAllReduce, rows * c.experts * kBytesPerFloat, "moe shares");
  };
  const bool recomputed = c.remat != nn::Remat::None;  // backward runs each block's forward again first
  for (int m = 0; m < microbatches; ++m) {
    for (const int64_t l : layers) block_forward(l);
    for (auto l = layers.rbegin(); l != layers.rend(); ++l) {
      if (recomputed) block_forward(*l);
      backward();
    }
  }
}

}  // namespace shardlab::parallel
