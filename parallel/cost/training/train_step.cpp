#include "parallel/cost/training/train_step.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "framework/error.h"
#include "parallel/cost/model/autograd_activations.h"
#include "parallel/cost/network/fat_tree.h"
#include "parallel/cost/network/multipod.h"
#include "parallel/cost/training/cpu_step.h"
#include "parallel/cost/training/zero_memory.h"
#include "parallel/pipeline/schedule.h"

namespace shardlab::cost {

std::string layout_summary(const Layout& l) {
  std::ostringstream out;
  const std::pair<const char*, int> axes[] = {
      {"data", l.data}, {"fsdp", l.fsdp}, {"context", l.context}, {"pipe", l.pipe}, {"expert", l.expert}, {"tensor", l.tensor}};
  for (const auto& [name, size] : axes)
    if (size > 1) out << (out.tellp() > 0 ? " " : "") << name << "=" << size;
  if (out.tellp() == 0) out << "single chip";
  if (l.data > 1 && l.zero > 0) out << " zero=" << l.zero;
  if (l.tensor > 1 && l.sequence_parallel) out << " sequence-parallel";
  if (l.pipe > 1 && l.schedule != parallel::ScheduleKind::k1F1B) {
    out << " " << parallel::to_string(l.schedule);
    if (l.virtual_stages > 1) out << " x" << l.virtual_stages;
  }
  if (l.microbatches > 1) out << " (microbatches " << l.microbatches << ")";
  return out.str();
}

std::string strategy_name(const Layout& l) {
  std::string s;
  const std::string dp = l.zero > 0 ? "ZeRO-" + std::to_string(l.zero) : "DP";
  const std::pair<std::string, int> parts[] = {{dp, l.data},  {"FSDP", l.fsdp}, {"CP", l.context},
                                               {"PP", l.pipe}, {"EP", l.expert}, {l.sequence_parallel ? "TP+SP" : "TP", l.tensor}};
  for (const auto& [name, size] : parts)
    if (size > 1) {
      if (!s.empty()) s += '+';
      s += name;
    }
  return s.empty() ? "single" : s;
}

std::string layout_problem(const TrainConfig& c, const Layout& l) {
  const TransformerShape& m = c.model;
  auto say = [](const std::string& what, int size, const std::string& dim, int64_t value) {
    return what + "=" + std::to_string(size) + " does not divide " + dim + "=" + std::to_string(value);
  };
  for (int size : {l.data, l.fsdp, l.context, l.pipe, l.expert, l.tensor, l.microbatches})
    if (size < 1) return "every axis size and the microbatch count must be >= 1";
  if (m.heads % l.tensor) return say("tensor", l.tensor, "heads N", m.heads);
  if (m.kv_heads % l.tensor && l.tensor % m.kv_heads) return say("tensor", l.tensor, "kv_heads K", m.kv_heads);
  if (m.d_ff % l.tensor) return say("tensor", l.tensor, "d_ff F", m.d_ff);
  if (m.layers % l.pipe) return say("pipe", l.pipe, "layers L", m.layers);
  if (l.zero < 0 || l.zero > 2) return "zero=" + std::to_string(l.zero) + " on the data axis must be 0, 1 or 2";
  if (l.virtual_stages < 1 || (l.virtual_stages > 1 && l.schedule != parallel::ScheduleKind::kInterleaved))
    return "virtual stages " + std::to_string(l.virtual_stages) + " need the interleaved schedule";
  if (l.pipe > 1 && l.schedule == parallel::ScheduleKind::kInterleaved) {  // what make_pipeline_schedule refuses
    if (l.virtual_stages < 2) return "the interleaved schedule needs 2 or more virtual stages per pipe rank";
    if (m.layers % (l.pipe * l.virtual_stages))
      return say("pipe x virtual stages", l.pipe * l.virtual_stages, "layers L", m.layers) + " (interleaved)";
    if (l.microbatches % l.pipe) return say("pipe", l.pipe, "microbatches", l.microbatches) + " (interleaved)";
  }
  if (l.expert > 1 && (m.experts == 0 || m.experts % l.expert))
    return say("expert", l.expert, "experts E", m.experts);
  if (l.context > m.context)
    return "context=" + std::to_string(l.context) + " exceeds the sequence length T=" + std::to_string(m.context) +
           "; shard the sequence at most T ways";
  if (l.context > 1 && c.shardlab_activations) {  // what train_gpt's layout validator refuses (parallel/layout.cpp)
    const std::string cp = "context=" + std::to_string(l.context);
    if (m.context % (2 * l.context))
      return cp + " cuts each sequence in 2 x context head-tail chunks; T=" + std::to_string(m.context) +
             " is not a multiple of " + std::to_string(2 * l.context);
    if (m.experts > 0)  // train_gpt trains MoE under a context axis only dropless; the presets have a capacity
      return cp + " with a mixture-of-experts model: its capacity counts whole sequences (train_gpt needs "
                  "--capacity-factor 0 with a context axis)";
  }
  const double sequences = c.batch_tokens / m.context;
  const double split = static_cast<double>(l.data) * l.fsdp * l.expert * l.microbatches;
  if (sequences != std::floor(sequences) || std::fmod(sequences, split) != 0)
    return "batch of " + std::to_string(static_cast<int64_t>(sequences)) + " sequences does not split into " +
           std::to_string(static_cast<int64_t>(split)) + " (data x fsdp x expert x microbatches)";
  return "";
}

CollectiveCost axis_collective(CollectiveOp op, double bytes, int size, int inner, int chips,
                               const HardwareProfile& hw) {
  if (size <= 1) return {};
  if (hw.interconnect == Interconnect::kSwitched) {
    if (inner * size <= hw.node_size) return gpu_collective(op, bytes, size, hw);
    if (spans_whole_nodes(op, size, inner, hw)) return fat_tree_axis_collective(op, bytes, size, inner, hw);
    if (inner >= hw.node_size) {
      CollectiveCost c = torus_collective(op, bytes, {{size, true}}, hw.dcn, false);
      c.path = "infiniband";
      return c;
    }
    HardwareProfile part = hw;  // this group's share of each node
    part.node_size = hw.node_size / inner;
    return gpu_collective(op, bytes, size, part);
  }
  return torus_axis_collective(op, bytes, size, inner, chips, hw);
}

namespace {

// One chip sends `bytes` to its neighbour on an axis with `inner` chips nested inside it (a
// pipeline stage's activations, a ring step's K/V block): an all_gather of two such shards.
CollectiveCost neighbour_send(double bytes, int inner, int chips, const HardwareProfile& hw) {
  return axis_collective(CollectiveOp::kAllGather, 2 * bytes, 2, inner, chips, hw);
}

struct AxisSpec {
  const char* name;
  int size;
  int inner;  // chips on axes nested inside this one
};

// TrainConfig::cpu_step: compute as train_gpt predicts its own without the probe, and the
// step as compute plus the communication that cannot hide behind it.
void cpu_step_time(const TrainConfig& c, const Layout& l, const HardwareProfile& hw, StepEstimate& s) {
  double busy = 0;
  if (c.measured_compute) {  // a rank's compute span, the pipeline's bubble and shared cores included
    s.compute_seconds = c.measured_compute(l);
    busy = s.compute_seconds * (1 - s.bubble_fraction);
  } else {
    const double flops = s.compute_seconds * (1 - s.bubble_fraction);  // the FLOPs at the GEMM rate
    busy = (flops + elementwise_seconds(c, l, hw) + optimizer_seconds(c, l, hw, optimizer_shards(l)) +
            expert_padding_seconds(c, c.capacity_factor, l.num_ranks(), hw.flops_fp32)) *
           c.core_sharing;
    s.compute_seconds = busy / (1 - s.bubble_fraction);
  }
  double blocking = 0, state = 0;  // awaited where needed; may run under compute (AxisComm::overlappable)
  for (const AxisComm& comm : s.comms) (comm.overlappable ? state : blocking) += comm.seconds - comm.hidden;
  // ZeRO-3's gathers and reductions spread over the whole step; DP's reduction runs under
  // the last microbatch's backward (2/3 of its compute).
  const double cover = l.fsdp * l.context > 1 ? busy : busy * 2.0 / 3.0 / l.microbatches;
  s.step_seconds = s.compute_seconds + blocking + std::max(0.0, state - cover);
  s.cpu_step = true;
  s.compute_bound = s.compute_seconds >= blocking + state;
}

}  // namespace

StepEstimate estimate_train_step(const TrainConfig& c, const Layout& l, const HardwareProfile& hw) {
  if (const std::string problem = layout_problem(c, l); !problem.empty()) throw UserError(problem);
  const TransformerShape& m = c.model;
  const ParamCounts p = count_params(m);
  const int chips = l.num_ranks();
  const double t = l.tensor, pp = l.pipe, f = static_cast<double>(l.fsdp) * l.context, e = l.expert,
               mb = l.microbatches, cp = l.context;
  const double layers_per_stage = m.layers / pp;
  const double replicas = static_cast<double>(l.data) * l.fsdp * l.expert;
  // Each sequence's shard on the context axis is ceil(T / context) tokens, the last padded.
  const double shard_length = std::ceil(static_cast<double>(m.context) / cp);
  const double padded_batch = c.batch_tokens / static_cast<double>(m.context) * shard_length * cp;
  const double tokens_per_replica = padded_batch / replicas;  // all context shards of a replica
  const double dense_params = p.total - p.experts;
  const double param_bytes = bytes_of(c.precision.params), grad_bytes = bytes_of(c.precision.grads);
  const double act_bytes = bytes_of(c.precision.activations);

  // Axes innermost first, so each knows how many chips sit inside it.
  const AxisSpec tensor{"tensor", l.tensor, 1};
  const AxisSpec expert{"expert", l.expert, l.tensor};
  const AxisSpec pipe{"pipe", l.pipe, l.tensor * l.expert};
  const AxisSpec context{"context", l.context, l.tensor * l.expert * l.pipe};
  // The state shards over fsdp x context, gathered and reduced as one group.
  const AxisSpec state{l.context == 1 ? "fsdp" : l.fsdp == 1 ? "context" : "fsdp+context", l.fsdp * l.context,
                       l.tensor * l.expert * l.pipe};
  const AxisSpec data{"data", l.data, l.tensor * l.expert * l.pipe * l.fsdp * l.context};

  StepEstimate s;
  s.layout = l;
  auto add = [&](const AxisSpec& axis, CollectiveOp op, const std::string& what, double bytes, int count,
                 bool overlappable = false) {
    if (axis.size <= 1 || count == 0 || bytes <= 0) return;
    const CollectiveCost one = axis_collective(op, bytes, axis.size, axis.inner, chips, hw);
    s.comms.push_back({axis.name, what, op, bytes, count, count * one.seconds, one.path, 0.0, false, overlappable});
  };

  const double model_shard = model_shard_params(p, t, pp, e);
  const int per_microbatch = static_cast<int>(mb);
  // Gathers and gradient reductions carry the wire dtypes (network/wire_format.h), whatever
  // the stored params and grads are.
  const WireDtypes& wire = c.precision.wire;
  add(state, CollectiveOp::kAllGather, "all_gather(params) forward+backward", wire_bytes(wire.gather, model_shard),
      2 * per_microbatch, true);
  add(state, CollectiveOp::kReduceScatter, "reduce_scatter(grads)", wire_bytes(wire.reduce, model_shard),
      per_microbatch, true);
  // ZeRO-1 all_reduces the gradients, ZeRO-2 reduce_scatters them; both all_gather the
  // updated parameters once per step.
  if (l.zero == 2) {
    add(data, CollectiveOp::kReduceScatter, "reduce_scatter(grads)", wire_bytes(wire.reduce, model_shard / f), 1, true);
  } else {
    add(data, CollectiveOp::kAllReduce, "all_reduce(grads)", wire_bytes(wire.reduce, model_shard / f), 1, true);
  }
  if (l.zero >= 1)
    add(data, CollectiveOp::kAllGather, "all_gather(params) after the step", wire_bytes(wire.gather, model_shard / f), 1);
  add(expert, CollectiveOp::kAllReduce, "all_reduce(dense grads)", wire_bytes(wire.reduce, dense_params / (t * pp * f)),
      1, true);

  const double mb_tokens_group = tokens_per_replica / mb;  // one microbatch of one replica
  const double mb_tokens_chip = mb_tokens_group / cp;       // ... of which one context shard
  const int remat_passes = c.remat == nn::Remat::Full ? 3 : 2;  // forward (+ recompute) + backward
  add(tensor, CollectiveOp::kAllReduce, "all_reduce(activations) per block",
      mb_tokens_chip * m.d_model * act_bytes, static_cast<int>(2 * remat_passes * layers_per_stage * mb));
  // Attention over the context axis (its tensor rank's kv heads, training/context_attention.h).
  const double kv_heads_per_chip = std::max(1.0, static_cast<double>(m.kv_heads) / t);
  if (c.context_comm == ContextComm::kAllGather) {  // the whole sequences' K and V each pass
    const double kv_bytes = mb_tokens_group * 2 * kv_heads_per_chip * m.head_dim * act_bytes;
    add(context, CollectiveOp::kAllGather, "all_gather(K, V) per layer", kv_bytes,
        static_cast<int>(remat_passes * layers_per_stage * mb));
    add(context, CollectiveOp::kReduceScatter, "reduce_scatter(dK, dV) per layer", kv_bytes,
        static_cast<int>(layers_per_stage * mb));
  } else if (l.context > 1) {  // a ring: each step's block under the block attention in hand
    const double rows = mb_tokens_chip / shard_length;
    RingStep step;
    step.block_bytes = ring_block_bytes(rows, shard_length, kv_heads_per_chip, m.head_dim, act_bytes);
    const CollectiveCost hop = neighbour_send(step.block_bytes, context.inner, chips, hw);
    step.transfer_seconds = hop.seconds;
    step.compute_seconds = ring_block_flops(rows, shard_length, shard_length, m.heads / t, m.head_dim) /
                           (peak_flops(hw, c.precision.compute) * c.efficiency);
    const RingLayer ring = ring_layer(step, l.context);
    const double forwards = (remat_passes - 1) * layers_per_stage * mb, backwards = layers_per_stage * mb;
    s.comms.push_back({"context", "ppermute(K, V) per ring step, forward", CollectiveOp::kPermute, step.block_bytes,
                       static_cast<int>(forwards * ring.forward_blocks), forwards * ring.forward_seconds, hop.path,
                       forwards * (ring.forward_seconds - ring.forward_exposed), true});
    s.comms.push_back({"context", "ppermute(K, V and dK, dV) per ring step, backward", CollectiveOp::kPermute,
                       step.block_bytes, static_cast<int>(backwards * ring.backward_blocks),
                       backwards * ring.backward_seconds, hop.path,
                       backwards * (ring.backward_seconds - ring.backward_exposed), true});
  }
  if (m.experts > 0) {  // the MoE layers of a stage only
    const double moe_layers_per_stage = layers_per_stage * m.moe_layers() / m.layers;
    add(expert, CollectiveOp::kAllToAll, "all_to_all(tokens) dispatch+combine",
        mb_tokens_chip * e * m.top_k * m.d_model * act_bytes / t,
        static_cast<int>(2 * remat_passes * moe_layers_per_stage * mb));
  }
  if (l.pipe > 1) {  // a send of one microbatch's activations
    const double send = mb_tokens_chip * m.d_model * act_bytes;
    const CollectiveCost one = neighbour_send(send, pipe.inner, chips, hw);
    s.comms.push_back({"pipe", "send/recv(activations, grads)", CollectiveOp::kAllGather, send,
                       static_cast<int>(2 * mb), 2 * mb * one.seconds, one.path});
  }

  s.tokens_per_chip = padded_batch / chips;
  s.padding_fraction = 1 - c.batch_tokens / padded_batch;
  s.flops_per_chip = train_flops_per_token(m, c.remat) * s.tokens_per_chip;
  s.bubble_fraction = parallel::predicted_bubble(l.schedule, l.pipe, l.virtual_stages, l.microbatches);
  s.compute_seconds = s.flops_per_chip / (peak_flops(hw, c.precision.compute) * c.efficiency) /
                      (1 - s.bubble_fraction);
  std::map<std::string, double> per_axis;
  double overlapped = 0, traffic = 0;  // what may overlap compute; every transfer
  for (const AxisComm& comm : s.comms) {
    const double exposed = comm.seconds - comm.hidden;
    s.comm_seconds += exposed;
    per_axis[comm.axis] += exposed;
    (comm.stalls ? s.ring_exposed_seconds : overlapped) += exposed;
    traffic += comm.seconds;
  }
  s.bottleneck = "compute";
  if (s.comm_seconds > s.compute_seconds)
    s.bottleneck = std::max_element(per_axis.begin(), per_axis.end(),
                                    [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  s.compute_bound = s.compute_seconds >= s.comm_seconds;
  s.step_seconds = std::max(s.compute_seconds, overlapped) + s.ring_exposed_seconds;
  s.step_seconds_serial = s.compute_seconds + traffic;
  if (c.cpu_step) cpu_step_time(c, l, hw, s);

  // The fsdp x context group is ZeRO-3: every piece of the state shards over it, the
  // gradients too while microbatches accumulate (each reduce_scatters its own). train_gpt's
  // ZeRO-3 (train_command's --zero 3) shards over its own group of ranks.
  const double shards = c.shardlab_activations ? zero_shard_ranks(l.data, l.fsdp, l.context, l.fsdp > 1 && l.data > 1) : f;
  const bool data_zero = f == 1 && l.zero >= 1 && l.data > 1;  // ZeRO-1/2 over the data axis
  const ZeroShare share = zero_share(model_shard, f > 1 ? 3 : data_zero ? l.zero : 0, data_zero ? l.data : shards, false,
                                     layers_per_stage);
  s.memory.params = param_bytes * (share.params + share.gathered);
  s.memory.grads = grad_bytes * share.grads;
  s.memory.optimizer = c.precision.optimizer_bytes * share.optimizer;
  // 1F1B (and its interleaved and zero-bubble forms) keeps up to p microbatches per stage, GPipe all m.
  const double in_flight = l.schedule == parallel::ScheduleKind::kGPipe ? mb : std::min(mb, pp);
  if (c.shardlab_activations) {  // the first stage's, which keeps the most microbatches
    // Priced as train_gpt's estimate prices it (parallel/runtime/memory_estimate.h): at each
    // moment the stage's schedule starts a backward, the largest.
    ActivationQuery q{
        .tokens = mb_tokens_chip, .sequence = m.context, .remat = c.remat, .tensor = l.tensor, .expert = l.expert,
        .layers = layers_per_stage,
        .moe_layers = layers_per_stage * static_cast<double>(m.moe_layers()) / static_cast<double>(m.layers),
        .embedding = true, .head = l.pipe == 1, .matmul_copy_bytes = c.matmul_copy_bytes,
        .deferred_weight_gradients = l.pipe > 1 && l.schedule == parallel::ScheduleKind::kZeroBubble,
        .context = l.context, .context_allgather = c.context_comm == ContextComm::kAllGather};
    std::vector<parallel::BackwardMoment> moments{{.in_flight = static_cast<int>(in_flight), .gradients = mb > 1}};
    try {
      moments = parallel::backward_moments(l.schedule, l.pipe, l.virtual_stages, l.microbatches, 0);
    } catch (const UserError&) {  // a schedule train_gpt refuses (the planner says so apart): the bound
    }
    s.memory.peak = 0;
    for (const parallel::BackwardMoment& moment : moments) {
      q.in_flight = moment.in_flight / static_cast<double>(l.virtual_stages);  // per stage: 1/v of the rank's blocks
      q.awaiting_weight = moment.awaiting_weight / static_cast<double>(l.virtual_stages);
      const ActivationBytes a = shardlab_activation_bytes(m, q);
      const double peak =
          shardlab_peak_bytes(s.memory.params + s.memory.optimizer, s.memory.grads, moment.gradients, a);
      if (peak > s.memory.peak) {
        s.memory.peak = peak;
        s.memory.activations = a.peak();
      }
    }
  } else {
    s.memory.activations = activation_bytes(mb_tokens_chip * in_flight, 1,
                                            saved_activations_per_token_layer(m, c.remat) / t, c.precision.activations) *
                           layers_per_stage;
  }
  s.fits = s.memory.total() <= hw.hbm_bytes;
  return s;
}

double predicted_train_step_seconds(const TransformerShape& shape, int64_t tokens, const HardwareProfile& hw,
                                    DType compute, nn::Remat remat) {
  return train_flops_per_token(shape, remat) * static_cast<double>(tokens) / peak_flops(hw, compute);
}

}  // namespace shardlab::cost
