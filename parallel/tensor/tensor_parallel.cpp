#include "parallel/tensor/tensor_parallel.h"

#include <algorithm>
#include <cstring>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops/wire_format.h"
#include "framework/memory.h"
#include "framework/ops.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/diff_collectives.h"
#include "parallel/tensor/collective_matmul.h"
#include "parallel/tensor/vocab_parallel.h"

namespace shardlab::parallel {
namespace {

// forward: identity; backward: all_reduce of p's gradient over `tensor`.
Tensor reduce_gradient_over(const AxisGroup& tensor, const Tensor& p) {
  return record(p.detach(), "reduce_gradient(" + tensor.name() + ")", {p}, [&tensor](const Tensor& gy) {
    Tensor g = gy.clone();
    all_reduce(tensor, g.span());
    return std::vector<Tensor>{g};
  });
}

// forward: identity; backward: sums the gradient of the K and V rows of a local wqkv
// weight [(n_q + 2) * H, D] over the tensor ranks that share its one kv head (kv0 of K).
Tensor share_kv_gradients(const AxisGroup& tensor, const Tensor& w, int64_t n_q_rows, int64_t kv0, int64_t K) {
  Tensor y = w.detach();
  return record(y, "share_kv_gradients(" + tensor.name() + ")", {w}, [&tensor, n_q_rows, kv0, K](const Tensor& gy) {
    const int64_t D = gy.dim(1), kv_rows = (gy.dim(0) - n_q_rows) / 2, part = kv_rows * D;
    Tensor gx = gy.clone();
    std::vector<float> slots(2 * K * part, 0.0f);  // [K or V][kv head][rows, D]
    for (int64_t i = 0; i < 2; ++i) {
      std::memcpy(slots.data() + (i * K + kv0) * part, gx.data() + (n_q_rows + i * kv_rows) * D, part * sizeof(float));
    }
    all_reduce(tensor, slots);
    for (int64_t i = 0; i < 2; ++i) {
      std::memcpy(gx.data() + (n_q_rows + i * kv_rows) * D, slots.data() + (i * K + kv0) * part, part * sizeof(float));
    }
    return std::vector<Tensor>{gx};
  });
}

// The kv heads rank `rank` of t keeps: K/t of them when t divides K, else the one its
// query heads use (K divides t).
std::pair<int64_t, int64_t> kv_heads_of(const nn::ModelConfig& c, int t, int rank) {
  const int64_t N = c.n_heads, K = c.n_kv_heads;
  if (K % t == 0) return {rank * (K / t), K / t};
  return {rank * (N / t) / (N / K), 1};
}

}  // namespace

std::map<std::string, TensorShard> tensor_shards(const nn::ModelConfig& c, int t, int rank) {
  std::map<std::string, TensorShard> shards;
  if (t == 1) return shards;
  const int64_t N = c.n_heads, K = c.n_kv_heads, H = c.head_dim(), D = c.d_model, F = c.d_ff, V = c.vocab;
  const auto [kv0, kvn] = kv_heads_of(c, t, rank);
  const int64_t q0 = rank * (N / t) * H, qn = (N / t) * H;
  const std::vector<std::pair<int64_t, int64_t>> qkv = {
      {q0, q0 + qn}, {N * H + kv0 * H, N * H + (kv0 + kvn) * H}, {(N + K) * H + kv0 * H, (N + K) * H + (kv0 + kvn) * H}};
  const auto rows = [&](int64_t n) { return std::vector<std::pair<int64_t, int64_t>>{{rank * n / t, (rank + 1) * n / t}}; };
  const bool gpt = c.arch == nn::Arch::Gpt;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    shards[b + "attn.wqkv.weight"] = {{(N + 2 * K) * H, D}, 0, qkv};
    if (gpt) shards[b + "attn.wqkv.bias"] = {{(N + 2 * K) * H}, 0, qkv};
    shards[b + "attn.wo.weight"] = {{D, N * H}, 1, {{q0, q0 + qn}}};
    if (c.is_moe_layer(l)) {  // each expert's hidden units split, as the dense MLP's
      const int64_t E = c.experts;
      if (gpt) {
        shards[b + "moe.w_in"] = {{E, F, D}, 1, rows(F)};
        shards[b + "moe.b_in"] = {{E, F}, 1, rows(F)};
        shards[b + "moe.w_out"] = {{E, D, F}, 2, rows(F)};
      } else {
        shards[b + "moe.w_gate"] = {{E, F, D}, 1, rows(F)};
        shards[b + "moe.w_up"] = {{E, F, D}, 1, rows(F)};
        shards[b + "moe.w_down"] = {{E, D, F}, 2, rows(F)};
      }
    } else if (gpt) {
      shards[b + "mlp.fc.weight"] = {{F, D}, 0, rows(F)};
      shards[b + "mlp.fc.bias"] = {{F}, 0, rows(F)};
      shards[b + "mlp.fc2.weight"] = {{D, F}, 1, rows(F)};
    } else {
      shards[b + "mlp.gate.weight"] = {{F, D}, 0, rows(F)};
      shards[b + "mlp.up.weight"] = {{F, D}, 0, rows(F)};
      shards[b + "mlp.down.weight"] = {{D, F}, 1, rows(F)};
    }
  }
  shards["wte.weight"] = {{V, D}, 0, rows(V)};
  if (!gpt) shards["lm_head.weight"] = {{V, D}, 0, rows(V)};
  return shards;
}

TensorParallel::TensorParallel(nn::Transformer& model, const AxisGroup& tensor)
    : AxisShards(tensor, model, [&](int rank) { return tensor_shards(model.config, tensor.size(), rank); }),
      kv_share_(std::max<int64_t>(1, tensor.size() / model.config.n_kv_heads)) {}

std::vector<std::pair<int64_t, int64_t>> TensorParallel::norm_ranges(const std::string& name) const {
  if (!split(name)) return AxisShards::norm_ranges(name);
  const TensorShard& s = shard(name);
  int64_t n = 1;
  for (int64_t d : s.local()) n *= d;
  // Shared kv heads (wqkv's K and V rows, after the query rows): the first sharer counts them.
  if (kv_share_ > 1 && s.ranges.size() == 3 && group().rank() % kv_share_ != 0) {
    return {{0, n * (s.ranges[0].second - s.ranges[0].first) / s.local()[0]}};
  }
  return {{0, n}};
}

namespace {

// Where the replicated (or, with sequence parallelism, token-sharded) residual stream
// enters and leaves the tensor-parallel regions.
struct RegionHooks {
  nn::Module::Hook enter;    // before attention and the MLP, and after the final norm
  // With the collective matmul: entering a region whose first matmul gathers its input
  // itself (enter_fused), and that matmul (gathering_product).
  nn::Module::Hook enter_fused;
  std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> gathering_product;
  nn::Module::Hook leave;    // the row-parallel matmuls' partial products, and the embedding
  nn::Module::Hook restart;  // the embedding's output: where each microbatch starts
  nn::Module::ParameterHook partial;  // parameters applied to the stream (norms, row-parallel
                                      // biases, positions): their gradients in parts, or whole
};

// The stream's collectives carry `wire` (TensorParallelConfig::activation_dtype) both ways.
RegionHooks megatron_hooks(const AxisGroup& tensor, DType wire) {
  RegionHooks h;
  // forward: identity; backward: all_reduce over tensor (Megatron f)
  h.enter = [&tensor, wire](const Tensor& x) { return copy_to_group(tensor, x, Algorithm::kAuto, wire); };
  // forward: all_reduce over tensor; backward: identity (Megatron g)
  h.leave = [&tensor, wire](const Tensor& x) { return reduce_from_group(tensor, x, Algorithm::kAuto, wire); };
  h.restart = h.leave;
  return h;
}

// Sequence parallelism: outside the tensor-parallel regions each rank keeps B/t of the
// microbatch's sequences (dim 0 of x[B, T, D]); all_gather enters a region, reduce_scatter
// leaves it. A batch whose B the axis does not divide (an evaluation batch, decoding)
// runs as plain Megatron instead; the embedding decides, once per forward, for every hook
// after it (a rematerialised block's recompute sees the same decision).
RegionHooks sequence_parallel_hooks(const AxisGroup& tensor, std::shared_ptr<bool> sharded, DType wire) {
  const RegionHooks plain = megatron_hooks(tensor, wire);
  RegionHooks h;
  // forward: all_gather over tensor along dim 0; backward: reduce_scatter
  h.enter = [&tensor, sharded, plain, wire](const Tensor& x) {
    return *sharded ? gather_from_group(tensor, x, Algorithm::kAuto, wire) : plain.enter(x);
  };
  // forward: reduce_scatter over tensor along dim 0; backward: all_gather
  h.leave = [&tensor, sharded, plain, wire](const Tensor& x) {
    return *sharded ? scatter_to_group(tensor, x, Algorithm::kAuto, wire) : plain.leave(x);
  };
  h.restart = [&tensor, sharded, h](const Tensor& x) {
    *sharded = x.dim(0) % tensor.size() == 0;
    return h.leave(x);
  };
  // forward: identity; backward: all_reduce over tensor (each rank saw its sequences only)
  h.partial = [&tensor, sharded](const std::string&, const Tensor& p) {
    return *sharded ? reduce_gradient_over(tensor, p) : p;
  };
  return h;
}

// Sequence parallelism whose all_gathers before wqkv and fc run as collective matmuls.
RegionHooks overlapped_hooks(const AxisGroup& tensor, std::shared_ptr<bool> sharded, DType wire) {
  RegionHooks h = sequence_parallel_hooks(tensor, sharded, wire);
  const nn::Module::Hook plain_enter = megatron_hooks(tensor, wire).enter;
  h.enter_fused = [sharded, plain_enter](const Tensor& x) { return *sharded ? x : plain_enter(x); };
  h.gathering_product = [&tensor, sharded, wire](const Tensor& x, const Tensor& w, const Tensor& b) {
    return *sharded ? all_gather_linear(tensor, x, w, b, wire) : ops::linear(x, w, b);
  };
  return h;
}

}  // namespace

void shard_tensor_shapes(nn::Transformer& model, int t, int rank, uint64_t seed) {
  const nn::ModelConfig& c = model.config;
  const std::map<std::string, TensorShard> shards = tensor_shards(c, t, rank);
  for (const nn::Parameter& p : model.parameters()) {
    const auto it = shards.find(p.name);
    if (it != shards.end()) shard_parameter(p, it->second, seed);
  }
  for (auto& block : model.blocks) {
    block->attn.n_heads = c.n_heads / t;
    block->attn.n_kv_heads = kv_heads_of(c, t, rank).second;
  }
}

std::unique_ptr<TensorParallel> apply_tensor_parallel(nn::Transformer& model, const AxisGroup& tensor, uint64_t seed,
                                                      const TensorParallelConfig& config) {
  auto result = std::make_unique<TensorParallel>(model, tensor);
  const int t = tensor.size();
  if (t == 1) return result;
  const int rank = tensor.rank();
  const nn::ModelConfig& c = model.config;
  shard_tensor_shapes(model, t, rank, seed);

  const auto sharded = std::make_shared<bool>(false);  // this forward's stream: split or whole
  const RegionHooks h = config.overlap             ? overlapped_hooks(tensor, sharded, config.activation_dtype)
                        : config.sequence_parallel ? sequence_parallel_hooks(tensor, sharded, config.activation_dtype)
                                                   : megatron_hooks(tensor, config.activation_dtype);
  for (auto& block : model.blocks) {
    if (c.n_kv_heads < t) {
      SL_ASSERT(!block->attn.wqkv.bias.defined(), "shared kv heads are a LLaMA (bias-free) case");
      const int64_t q_rows = c.n_heads / t * c.head_dim(), kv0 = kv_heads_of(c, t, rank).first, K = c.n_kv_heads;
      block->attn.wqkv.parameter_hook = [&tensor, q_rows, kv0, K](const std::string&, const Tensor& w) {
        return share_kv_gradients(tensor, w, q_rows, kv0, K);
      };
    }
    // Attention's wqkv and GPT's fc are the only matmul reading their region's input: they
    // can gather it themselves. SwiGLU's gate and up both read it, so it is gathered once.
    const bool fused = static_cast<bool>(h.gathering_product);
    block->attn.add_forward_pre_hook(fused ? h.enter_fused : h.enter);
    if (fused) block->attn.wqkv.tensor_parallel.product = h.gathering_product;
    block->attn.wo.tensor_parallel.reduce_partial = h.leave;
    if (block->moe) {
      // Each expert's hidden units split: f on the tokens' way to the experts (the router
      // reads the whole stream and gives every rank the same routing), g on the experts'
      // row-parallel products. (Layout::validate refuses sequence parallelism here.)
      block->moe->tensor_parallel.dispatch_input = h.enter;
      block->moe->tensor_parallel.reduce_partial = h.leave;
      continue;
    }
    nn::Linear& row_parallel = block->mlp ? block->mlp->fc2 : block->swiglu->down;
    if (block->mlp) {
      block->mlp->add_forward_pre_hook(fused ? h.enter_fused : h.enter);
      if (fused) block->mlp->fc.tensor_parallel.product = h.gathering_product;
    } else {
      block->swiglu->add_forward_pre_hook(h.enter);
    }
    row_parallel.tensor_parallel.reduce_partial = h.leave;
    if (h.partial) {
      for (nn::Module* m : std::initializer_list<nn::Module*>{&block->norm1, &block->norm2, &block->attn.wo, &row_parallel}) {
        const bool linear = m == &block->attn.wo || m == &row_parallel;
        m->parameter_hook = [partial = h.partial, linear](const std::string& name, const Tensor& p) {
          return linear && name != "bias" ? p : partial(name, p);  // a row-parallel weight is whole
        };
      }
    }
  }
  const int64_t first = rank * c.vocab / t;
  model.wte.first_row = first;
  model.wte.add_forward_hook(h.restart);
  // A later pipeline stage receives the stream as the first stage left it: split by
  // sequences under sequence parallelism (Layout::validate made t divide a microbatch).
  if (h.partial) {
    model.tensor_parallel.stage_input = [sharded](const Tensor& x) {
      *sharded = true;
      return x;
    };
  }
  model.norm_f.add_forward_hook(h.enter);
  if (h.partial) {
    model.norm_f.parameter_hook = h.partial;
    if (model.wpe) model.wpe->parameter_hook = h.partial;
  }
  model.tensor_parallel.loss = [&tensor, first](const Tensor& logits, std::span<const int32_t> targets, double denominator) {
    return vocab_parallel_cross_entropy(tensor, logits, targets, first, denominator);
  };
  model.tensor_parallel.fused_loss = [&tensor, first, V = c.vocab](const Tensor& x, const Tensor& weight,
                                                                  std::span<const int32_t> targets, double denominator) {
    return vocab_parallel_linear_cross_entropy(tensor, x, weight, targets, first, V, denominator);
  };
  model.tensor_parallel.logits = [&tensor](const Tensor& logits) { return gather_vocab(tensor, logits); };
  return result;
}

void plan_tensor_parallel_step(StepPlan& plan, const Mesh& mesh, const nn::ModelConfig& c,
                               const TensorParallelConfig& config, int64_t rows, int64_t seq_len, int microbatches) {
  const std::string tp = kTensorAxis;
  if (!mesh.has_axis(tp) || mesh.axis_size(tp) == 1) return;
  const int t = mesh.axis_size(tp);
  const bool sp = config.sequence_parallel && rows % t == 0;
  const bool gpt = c.arch == nn::Arch::Gpt;
  const int64_t tokens = rows * seq_len, D = c.d_model * kBytesPerFloat;
  // The stream's collectives (entering and leaving regions, both ways) carry the activation
  // dtype; the loss's statistics and the parameter gradients summed here stay fp32.
  const DType wire = config.activation_dtype;
  const int64_t activations = wire_bytes(wire, tokens * c.d_model);
  const auto add = [&](CollectiveOp op, int64_t bytes, const std::string& what) {
    add_planned(plan, mesh, {tp, op, bytes, what});
  };
  // Entering a region: f's all_reduce in backward, or all_gather (reduce_scatter in backward).
  const auto enter = [&](bool forward, const std::string& what) {
    if (sp && forward) add(CollectiveOp::kAllGather, activations, what);
    else if (sp) add(CollectiveOp::kReduceScatter, activations, what);
    else if (!forward) add(CollectiveOp::kAllReduce, activations, what);
  };
  // Leaving a region: g's all_reduce in forward, or reduce_scatter (all_gather in backward).
  const auto leave = [&](bool forward, const std::string& what) {
    if (sp) add(forward ? CollectiveOp::kReduceScatter : CollectiveOp::kAllGather, activations, what);
    else if (forward) add(CollectiveOp::kAllReduce, activations, what);
  };
  // Sequence parallelism: the gradient of a parameter applied to the stream, summed.
  const auto partial = [&](int64_t bytes, const std::string& what) {
    if (sp) add(CollectiveOp::kAllReduce, bytes, what + " gradient");
  };
  const auto norm = [&](const std::string& name) {
    partial(D, name + " weight");
    if (gpt) partial(D, name + " bias");
  };
  // The collective matmul's all_gather: t-1 neighbour steps of this rank's rows.
  const auto gather_into_matmul = [&](bool fused, const std::string& what) {
    if (!sp || !config.overlap || !fused) return enter(true, what);
    for (int s = 1; s < t; ++s) {
      add(CollectiveOp::kPermute, activations / t, what + ", collective matmul step " + std::to_string(s));
    }
  };
  // An MoE block's g sums the experts' padded output buffer [E, rows * C, D] instead.
  const auto mlp_output = [&](int64_t l) {
    return c.is_moe_layer(l) ? wire_bytes(wire, c.experts * rows * nn::expert_capacity(c, seq_len) * c.d_model) : activations;
  };
  const auto block_forward = [&](int64_t l) {
    const std::string b = ", block " + std::to_string(l);
    gather_into_matmul(true, "attention input" + b);
    leave(true, "attention output" + b);
    gather_into_matmul(gpt, "MLP input" + b);
    if (c.is_moe_layer(l)) add(CollectiveOp::kAllReduce, mlp_output(l), "experts' output" + b);
    else leave(true, "MLP output" + b);
  };
  for (int m = 0; m < microbatches; ++m) {
    leave(true, "embedding");
    for (int64_t l = 0; l < c.n_layers; ++l) block_forward(l);
    enter(true, "head input");
    if (nn::fuses_head(c.fused_head, tokens, c.vocab / t)) {
      add(CollectiveOp::kAllGather, t * 3 * tokens * kBytesPerFloat, "fused loss row maxima, sums and target logits");
    } else {
      add(CollectiveOp::kAllGather, t * tokens * kBytesPerFloat, "loss row maxima");
      add(CollectiveOp::kAllReduce, 2 * tokens * kBytesPerFloat, "loss sums and target logits");
    }
    enter(false, "head input gradient");
    norm("final norm");
    for (int64_t l = c.n_layers - 1; l >= 0; --l) {
      const std::string b = ", block " + std::to_string(l);
      if (c.remat != nn::Remat::None) block_forward(l);  // the recomputed forward communicates again
      if (gpt) partial(D, "MLP output bias" + b);  // the bias is added after the reduce_scatter
      leave(false, "MLP output gradient" + b);
      enter(false, "MLP input gradient" + b);
      norm("MLP norm" + b);
      if (gpt) partial(D, "attention output bias" + b);
      leave(false, "attention output gradient" + b);
      // The collective matmul reduce-scatters its input gradient inside its own backward,
      // before the shared kv heads' weight gradient reaches its hook; ops::linear after.
      const bool fused = sp && config.overlap;
      if (fused) enter(false, "attention input gradient" + b);
      if (c.n_kv_heads < t) {
        add(CollectiveOp::kAllReduce, 2 * c.n_kv_heads * c.head_dim() * D, "shared kv head gradients" + b);
      }
      if (!fused) enter(false, "attention input gradient" + b);
      norm("attention norm" + b);
    }
    if (gpt) partial(seq_len * D, "position embedding");  // added after the embedding's reduce_scatter
    leave(false, "embedding gradient");
  }
}

}  // namespace shardlab::parallel
