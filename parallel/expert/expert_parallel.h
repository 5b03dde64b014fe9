// Expert parallelism (GShard, Switch Transformer; the book's training chapter on MoE):
// every MoE layer's E experts split over the `expert` axis, rank r of ep holding experts
// [r E/ep, (r+1) E/ep). The batch is split over the axis too, so the dense layers see
// ep times the ranks of data parallelism: their gradients are averaged over data x
// expert, the experts' over data alone (DataAxes::expert_data).
//
// Per MoE layer and microbatch, with S local sequences and C slots per expert and
// sequence (nn/moe.h), each rank routes its own tokens into a dispatch buffer
// [E, S*C, D], zero where a slot is empty, then
//
//   dispatch  all_to_all over expert: block j (experts of rank j) goes to rank j   [ep, E/ep, S*C, D]
//   experts   rank r runs its E/ep experts on the rows every rank sent them          [E/ep, ep*S*C, D]
//   combine   all_to_all back, then each token's gated sum over its kept choices
//   backward  the same two all_to_alls in reverse order (exchange_in_group's backward)
//
// so each all_to_all moves E*S*C*D values per rank, (ep-1)/ep of them to other ranks, in
// the activation dtype (fp32, or bf16 under --precision bf16: each value arrives rounded
// to bf16; the experts' bf16 matmuls read the dispatched tokens as they would anyway).
// The buffers are capacity-padded: their size depends on S, C and D only, never on the
// routing, so every rank sends and expects the same sizes however unbalanced the router
// is -- no count exchange, no hang. Dropless mode (capacity factor 0) sets C per layer
// forward to what the fullest expert needs in any sequence of any rank of the group: one
// all_reduce (max) of a single number on the expert axis before the dispatch agrees it,
// so the buffers still have one shape, and they carry about k/E of T slots per expert
// (plus the router's imbalance), not T.
//
//   auto shards = apply_expert_parallel(model, mesh.axis("expert"), seed);  // after tensor, before DP
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "framework/nn/transformer.h"
#include "framework/precision.h"
#include "parallel/comm/step_plan.h"
#include "parallel/model_shards.h"

namespace shardlab::parallel {

// Rank `rank` of `ep`'s shard of every expert weight of `model`, by name: a block of the
// leading expert dim of the weight as the model holds it now (whole, or its tensor-parallel
// part).
std::map<std::string, TensorShard> expert_shards(nn::Transformer& model, int ep, int rank);

class ExpertParallel : public AxisShards {
 public:
  ExpertParallel(nn::Transformer& model, const AxisGroup& expert);
  // The parameters split over the axis (the experts), whose gradients the data-parallel
  // strategy averages over the data axes only.
  std::set<std::string> expert_parameters() const;

 private:
  std::set<std::string> names_;
};

// Shards the experts of `model` over `expert` in place (deferred ones filled from `seed`
// at their global indices, so every layout starts from the same model) and installs
// each MoE layer's exchange hook, whose all_to_alls carry `wire` (fp32 or bf16, both ways).
// Layout::validate has checked that ep divides E.
std::unique_ptr<ExpertParallel> apply_expert_parallel(nn::Transformer& model, const AxisGroup& expert, uint64_t seed,
                                                      DType wire = DType::kF32);

// Bytes one rank sends through one all_to_all of one MoE layer: the dispatch buffer of
// `rows` sequences of `seq_len` tokens, E*S*C*D values in `wire` (the part that stays
// local included). Dropless: the most it can be (C = T); a step moves what its routing needs.
int64_t expert_all_to_all_bytes(const nn::ModelConfig& config, int64_t rows, int64_t seq_len,
                                DType wire = DType::kF32);

// Appends the all_to_alls those hooks issue on the expert axis in one training step of
// `microbatches` microbatches of `rows` sequences through the MoE blocks `layers` (those
// this rank's pipeline stages hold), in issue order (step_plan.h): per microbatch, each
// layer's dispatch and combine forward (dropless: after the capacity's all_reduce, with
// the all_to_alls at their largest), then in reverse layer order the forward again
// where remat recomputes it, and the backward pair. (A pipeline schedule interleaves the
// microbatches' passes; every rank of an expert group runs the same schedule.)
void plan_expert_parallel_step(StepPlan& plan, const Mesh& mesh, const nn::ModelConfig& config,
                               const std::vector<int64_t>& layers, int64_t rows, int64_t seq_len, int microbatches,
                               DType wire = DType::kF32);

}  // namespace shardlab::parallel
