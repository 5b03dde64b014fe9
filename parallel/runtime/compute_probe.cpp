#include "parallel/runtime/compute_probe.h"

#include <omp.h>

#include <algorithm>
#include <utility>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "parallel/runtime/metrics.h"
#include "framework/nn/module.h"
#include "framework/nn/transformer.h"
#include "framework/ops/block_attention.h"
#include "framework/rng.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/collectives.h"
#include "parallel/data_parallel/gradient_sync.h"
#include "parallel/tensor/tensor_parallel.h"

namespace shardlab::runtime {
namespace {

constexpr int kRepeats = 7;          // the median of seven, after one warm-up pass
constexpr int64_t kMaxPeriods = 4;   // the long stand-in's periods at most
constexpr int64_t kProbeTokens = 512;  // tokens timed (whole sequences); a microbatch's time scales with its rows

// A context rank's attention without its axis: whole sequences through the block kernels
// its ring runs (ops/block_attention.h), one key block per chunk of the sequence split, so
// that the c ranks' work together is timed at once.
std::shared_ptr<const nn::ContextParallelHooks> whole_sequence_block_attention(int64_t block) {
  auto hooks = std::make_shared<nn::ContextParallelHooks>();
  hooks->positions = [](int64_t length) {
    std::vector<int64_t> at(static_cast<size_t>(length));
    std::iota(at.begin(), at.end(), int64_t{0});
    return at;
  };
  hooks->attention = [block](const Tensor& qkv, int n_heads, int n_kv_heads) {
    return ops::blockwise_causal_attention(qkv, n_heads, n_kv_heads, block);
  };
  return hooks;
}

// The run's model cut to `blocks` blocks and to this rank's tensor shard, with one
// microbatch of tokens from its shard of the vocabulary. Under a context axis its attention
// runs the context kernels on keys blocks of `attention_block` positions.
struct StandIn {
  std::unique_ptr<nn::Transformer> model;
  std::vector<int32_t> ids;
  int64_t rows = 0, seq = 0;

  StandIn(const RunConfig& run, int64_t blocks, int tensor, int64_t rows_, int64_t attention_block)
      : rows(rows_), seq(run.sequence_length()) {
    nn::ModelConfig c = run.model;
    c.n_layers = blocks;
    model = nn::deferred_transformer(c);
    if (tensor > 1) parallel::shard_tensor_shapes(*model, tensor, 0, run.seed);
    nn::initialize_unallocated(*model, run.seed);
    if (attention_block > 0) {
      model->context_parallel = whole_sequence_block_attention(attention_block);
      for (auto& block : model->blocks) block->attn.context_parallel = model->context_parallel;
    }
    // Dropless layers size their buffers by the routing, and random tokens route more
    // evenly than text: time them at their bound, every expert taking the whole sequence.
    for (auto& block : model->blocks) {
      if (block->moe) block->moe->expert_parallel.agree_capacity = [seq = seq](int64_t) { return seq; };
    }
    const uint64_t vocab = static_cast<uint64_t>(std::max<int64_t>(1, c.vocab / tensor));
    const Rng rng(run.seed);
    ids.resize(static_cast<size_t>(rows * seq));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(rng.bits(0, i) % vocab);
  }

  double step_seconds() {  // forward and backward
    const auto start = std::chrono::steady_clock::now();
    model->loss(ids, ids, rows, seq).backward();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    model->zero_grad();
    return seconds;
  }
};

}  // namespace

RankTiming time_rank_compute(const RunConfig& run, const parallel::Layout& layout) {
  const int64_t rows = std::max<int64_t>(1, run.batch / layout.data_ranks() / std::max(1, run.grad_accum));
  RankTiming t;
  t.period_blocks = run.model.experts > 0 ? run.model.moe_every : 1;
  const int64_t seq = std::max<int64_t>(1, run.sequence_length());
  const int64_t timed = std::min(rows, std::max<int64_t>(1, (kProbeTokens + seq - 1) / seq));
  // The long stand-in has as many periods as this rank's stage (up to kMaxPeriods): its
  // time is then the stage's own, and extrapolating to deeper stages divides the noise of
  // the difference by K - 1.
  const int64_t stage_periods = std::max<int64_t>(1, run.model.n_layers / layout.pipe / t.period_blocks);
  const int64_t K = std::clamp<int64_t>(stage_periods, 2, kMaxPeriods);
  // A context rank holds T/c positions of each row and, balanced, a 1/c share of the causal
  // attention: the stand-in times whole rows in its ring's key blocks, scaled by 1/c.
  const int context = layout.context;
  const int64_t chunks = run.cp_load_balance ? 2 * context : context;
  const int64_t attention_block = context > 1 ? seq / chunks : 0;
  StandIn one_period(run, t.period_blocks, layout.tensor, timed, attention_block),
      k_periods(run, K * t.period_blocks, layout.tensor, timed, attention_block);
  std::vector<double> ones, longs;
  for (int pass = 0; pass <= kRepeats; ++pass) {  // alternating, so that both see the same load
    const double a = one_period.step_seconds(), b = k_periods.step_seconds();
    if (pass == 0) continue;  // warm-up: oneDNN primitives, first touch of the buffers
    ones.push_back(a);
    longs.push_back(b);
  }
  // The median, not the fastest: a step is measured by its median too, and on a shared
  // machine the fastest pass is a moment the steps will rarely see.
  const double one = median(ones), many = median(longs);
  const double period = std::max((many - one) / static_cast<double>(K - 1), 0.5 * one);
  for (size_t i = 0; i < ones.size(); ++i) t.total_seconds += ones[i] + longs[i];
  // Scaled to the microbatch's rows (this rank's share of them).
  const double scale = static_cast<double>(rows) / static_cast<double>(timed) / context;
  t.period_seconds = scale * period;
  t.head_seconds = scale * std::max(0.0, one - period);
  return t;
}

std::string ComputeProbe::describe() const {
  char text[128];
  std::snprintf(text, sizeof text, "%s %.1f ms + head %.1f ms per microbatch",
                period_blocks > 1 ? "period of blocks" : "block", period_seconds * 1e3, head_seconds * 1e3);
  return text;
}

parallel::Layout mesh_layout(const RunConfig& run, const parallel::Mesh& mesh) {
  parallel::Layout layout = run.layout();
  for (const std::string& axis : parallel::kAxisNames) *layout.degree(axis) = mesh.size_of(axis);
  if (layout.zero == 3) {  // to the cost model ZeRO-3 is an fsdp axis: the data axis's, when the mesh has none
    if (layout.fsdp == 1) std::swap(layout.data, layout.fsdp);
    layout.zero = 0;
  }
  return layout;
}

ComputeProbe probe_compute(const RunConfig& run, const parallel::Mesh& mesh) {
  const RankTiming mine = time_rank_compute(run, mesh_layout(run, mesh));
  // Every rank's timing, all probing at once, combined as the planner combines its ranks'.
  const std::vector<float> sent = {static_cast<float>(mine.period_seconds), static_cast<float>(mine.head_seconds),
                                   static_cast<float>(mine.total_seconds)};
  std::vector<float> all(sent.size() * static_cast<size_t>(mesh.size()));
  parallel::all_gather(mesh.all(), sent, all);
  std::vector<RankTiming> ranks(static_cast<size_t>(mesh.size()));
  for (size_t r = 0; r < ranks.size(); ++r)
    ranks[r] = {.period_blocks = mine.period_blocks, .period_seconds = all[3 * r], .head_seconds = all[3 * r + 1],
                .total_seconds = all[3 * r + 2]};
  const double threads = static_cast<double>(parallel::ranks_sharing_node(mesh.all().comm())) * omp_get_max_threads();
  return combine_rank_timings(ranks, threads / std::max(1u, std::thread::hardware_concurrency()));
}

ComputeProbe combine_rank_timings(const std::vector<RankTiming>& ranks, double core_sharing) {
  ComputeProbe probe;
  if (ranks.empty()) return probe;
  double total = 0, slowest = 0;  // the mean, and the slowest rank's probe: what a synchronised step waits for
  for (const RankTiming& t : ranks) {
    probe.period_seconds += t.period_seconds / static_cast<double>(ranks.size());
    probe.head_seconds += t.head_seconds / static_cast<double>(ranks.size());
    total += t.total_seconds;
    slowest = std::max(slowest, t.total_seconds);
  }
  probe.period_blocks = ranks.front().period_blocks;
  const double mean = total / static_cast<double>(ranks.size());
  probe.rank_skew = mean > 0 ? std::max(0.0, slowest / mean - 1.0) : 0.0;
  probe.core_sharing = std::max(1.0, core_sharing);
  return probe;
}

}  // namespace shardlab::runtime
