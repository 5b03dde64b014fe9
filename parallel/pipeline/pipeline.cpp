#include "parallel/pipeline/pipeline.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/ops.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/ring_algorithms.h"
#include "parallel/cost/model/transformer.h"

namespace shardlab::parallel {
namespace {

const std::string kTiedEmbedding = "wte.weight";

bool tied(const nn::ModelConfig& m) { return m.arch == nn::Arch::Gpt; }

// The stages that hold parameter `name`, given the stage boundaries.
std::vector<int> holders(const std::string& name, const nn::ModelConfig& m, const std::vector<int64_t>& first) {
  const int last = static_cast<int>(first.size()) - 2;
  if (name == kTiedEmbedding) return tied(m) && last > 0 ? std::vector<int>{0, last} : std::vector<int>{0};
  if (name.rfind("wpe.", 0) == 0) return {0};
  if (name.rfind("blocks.", 0) == 0) {
    const int64_t block = std::stoll(name.substr(7));
    const auto it = std::upper_bound(first.begin(), first.end(), block);
    return {static_cast<int>(it - first.begin()) - 1};
  }
  return {last};  // norm_f, lm_head
}

// The pipeline's view of the parameters for the data-parallel strategy: what a rank
// holds is whole (or the inner tensor- or expert-parallel part of it); the tied embedding's
// duplicate on the last stage is neither counted in the norm nor written to checkpoints.
class PipelineShards : public ModelShards {
 public:
  PipelineShards(const Mesh& mesh, bool duplicate_embedding, std::shared_ptr<const ModelShards> inner)
      : group_(inner ? mesh.group_named(std::string(kPipeAxis) + "+" + inner->group().name()) : mesh.axis(kPipeAxis)),
        duplicate_(duplicate_embedding),
        inner_(std::move(inner)) {}

  const AxisGroup& group() const override { return group_; }
  std::vector<std::pair<int64_t, int64_t>> norm_ranges(const std::string& name) const override {
    if (duplicate_ && name == kTiedEmbedding) return {};
    if (inner_) return inner_->norm_ranges(name);
    return {{0, std::numeric_limits<int64_t>::max()}};
  }
  // Not collective over the pipe axis: each stage writes its own parameters in turn
  // (parallel::save_checkpoint), through the tensor or expert group where there is one.
  void write(CheckpointSink* writer, const std::string& key, const std::string& param,
             std::span<const float> data) const override {
    if (duplicate_ && param == kTiedEmbedding) return;  // the first stage writes the same values
    if (inner_) return inner_->write(writer, key, param, data);
    if (writer) writer->write_range(key, shapes_.at(param), 0, data);
  }
  void read(const CheckpointReader& reader, const std::string& key, const std::string& param,
            std::span<float> out) const override {
    if (inner_) return inner_->read(reader, key, param, out);
    reader.read(key, shapes_.at(param), out);
  }
  void add_shape(const std::string& param, const Shape& shape) { shapes_[param] = shape; }

 private:
  const AxisGroup& group_;
  bool duplicate_;
  std::shared_ptr<const ModelShards> inner_;
  std::map<std::string, Shape> shapes_;
};

// Tags tell apart the messages in flight between two ranks; the tied embedding's is apart.
// They wrap after 1023 (microbatch, stage, direction) triples, far more than a schedule
// keeps in flight between two ranks at once (about p microbatches per boundary).
constexpr int kTiedEmbeddingTag = kFirstScheduleTag - 1;

// Adds the seconds of its scope to *total (when given).
class Stopwatch {
 public:
  explicit Stopwatch(double* total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() {
    if (total_) *total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double* total_;
  std::chrono::steady_clock::time_point start_;
};

bool is_compute(ActionKind k) {
  return k == ActionKind::kForward || k == ActionKind::kBackward || k == ActionKind::kBackwardInput ||
         k == ActionKind::kBackwardWeight;
}

int message_tag(bool gradient, int microbatch, int stage, int stages) {
  return ((microbatch * stages + stage) * 2 + (gradient ? 1 : 0)) % kTiedEmbeddingTag;
}

}  // namespace

std::vector<int64_t> stage_boundaries(const nn::ModelConfig& model, int stages, const std::vector<int64_t>& layers) {
  const int64_t L = model.n_layers;
  std::vector<int64_t> first{0};
  if (!layers.empty()) {
    for (int64_t n : layers) first.push_back(first.back() + n);
    return first;
  }
  // Forward FLOPs per token: a block's matmuls and attention; the head's projection.
  const cost::TransformerShape shape = cost::shape_of(model);
  const cost::ParamCounts params = cost::count_params(shape);
  const double block = 2.0 * (params.attention + params.mlp + params.norms) / L +
                       cost::attention_flops_per_token(shape, model.context) / L;
  const double head = 2.0 * static_cast<double>(model.d_model * model.vocab);
  // best[s][l]: the smallest costliest stage over splits of blocks [0, l) into stages [0, s).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int64_t>> cut(stages + 1, std::vector<int64_t>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s) {
    for (int64_t l = s; l <= L; ++l) {
      for (int64_t k = s - 1; k < l; ++k) {  // stage s-1 runs blocks [k, l), at least one
        const double c = (l - k) * block + (s == stages ? head : 0.0);
        const double worst = std::max(best[s - 1][k], c);
        if (worst < best[s][l]) best[s][l] = worst, cut[s][l] = k;
      }
    }
  }
  std::vector<int64_t> reversed{L};
  for (int s = stages, l = static_cast<int>(L); s > 0; --s) reversed.push_back(l = static_cast<int>(cut[s][l]));
  return {reversed.rbegin(), reversed.rend()};
}

struct PipelineParallel::InFlight {
  Tensor input;        // the received activation, a leaf whose gradient goes back (stages > 0)
  Tensor output;       // the stage's output, or its scaled loss on the last stage
  Tensor output_grad;  // received from the next stage for the backward
  WeightGradients weights;  // zero-bubble: what the input-gradient pass left for the weight pass
};

PipelineParallel::PipelineParallel(nn::Transformer& model, const Mesh& mesh, const PipelineConfig& config,
                                   std::shared_ptr<const ModelShards> inner)
    : model_(model), pipe_(mesh.axis(kPipeAxis)), config_(config),
      schedule_(make_pipeline_schedule(config.schedule, pipe_.size(), config.virtual_stages, config.microbatches)),
      first_block_(stage_boundaries(model.config, schedule_.num_stages(), config.layers)) {
  prediction_ = check(schedule_);  // Layout::validate has checked it already
  const int here = pipe_.rank(), stages = schedule_.num_stages();
  const bool duplicate = tied(model.config) && stages > 1 && schedule_.rank_of(stages - 1) == here && here != 0;
  auto shards = std::make_shared<PipelineShards>(mesh, duplicate, std::move(inner));
  for (const nn::Parameter& p : model.parameters()) {
    const std::vector<int> on = holders(p.name, model.config, first_block_);
    const bool kept = std::any_of(on.begin(), on.end(), [&](int stage) { return schedule_.rank_of(stage) == here; });
    placements_.push_back({p.tensor, p.tensor->shape(), schedule_.rank_of(on.front()), !kept});
    if (kept) shards->add_shape(p.name, p.tensor->shape());
    else *p.tensor = Tensor();  // another stage's: dropped from the model
  }
  shards_ = std::move(shards);
}

void PipelineParallel::gather_full_params() {
  for (Placement& p : placements_) {
    Tensor buffer = Tensor::zeros(p.shape);
    if (pipe_.rank() == p.holder) std::copy(p.slot->data(), p.slot->data() + buffer.numel(), buffer.data());
    all_reduce(pipe_, buffer.span());  // x + 0 + ... + 0 == x
    if (p.dropped) *p.slot = buffer;
  }
}

void PipelineParallel::release_full_params() {
  for (Placement& p : placements_) {
    if (p.dropped) *p.slot = Tensor();
  }
}

void drop_other_stages(nn::Transformer& model, const Mesh& mesh, const PipelineConfig& config) {
  PipelineParallel(model, mesh, config, nullptr);
}

Tensor PipelineParallel::run_forward(const data::Batch& micro, int stage, const Tensor& input) const {
  const int last = schedule_.num_stages() - 1;
  Tensor x = stage == 0                ? model_.embed(micro.inputs, micro.rows, micro.seq_len)
             : model_.tensor_parallel.stage_input ? model_.tensor_parallel.stage_input(input)
                                  : input;
  for (int64_t b = first_block_[stage]; b < first_block_[stage + 1]; ++b) x = (*model_.blocks[b])(x);
  if (stage < last) return x;
  const Tensor loss = model_.head_loss(x, micro.targets);
  return ops::scale(loss, 1.0f / static_cast<float>(config_.microbatches));
}

double PipelineParallel::forward_backward(const data::Batch& batch, CommTrace* trace) {
  const int m = config_.microbatches, S = schedule_.num_stages();
  std::map<std::pair<int, int>, InFlight> in_flight;       // (microbatch, stage)
  std::vector<std::pair<Tensor, CollectiveHandle>> sends;  // each buffer lives until its send completes
  float loss = 0.0f;
  const auto start = std::chrono::steady_clock::now();
  double compute = 0.0;  // seconds in this rank's compute actions
  // One microbatch's activation, or this rank's sequences of it under sequence parallelism.
  const Shape activation = message_shape(batch.rows, batch.seq_len);
  for (const Action& a : schedule_.actions[pipe_.rank()]) {
    // A sent activation or gradient is freed as soon as its send completes.
    std::erase_if(sends, [](auto& send) { return send.second.test(); });
    InFlight& state = in_flight[{a.microbatch, a.stage}];
    std::optional<ComputeSpan> span;
    if (trace && is_compute(a.kind)) span.emplace(*trace, to_string(a));
    const Stopwatch stopwatch(is_compute(a.kind) ? &compute : nullptr);
    switch (a.kind) {
      case ActionKind::kRecvActivation:
        state.input = Tensor::empty(activation);
        recv(pipe_, state.input.span(), schedule_.rank_of(a.stage - 1), message_tag(false, a.microbatch, a.stage, S),
             config_.wire);
        state.input.set_requires_grad(true);
        break;
      case ActionKind::kForward:
        state.output = run_forward(batch.microbatch(a.microbatch, m), a.stage, state.input);
        if (a.stage == S - 1) loss += state.output.item();
        break;
      case ActionKind::kSendActivation: {
        const Tensor out = state.output.detach();
        sends.emplace_back(out, send_async(pipe_, out.span(), schedule_.rank_of(a.stage + 1),
                                           message_tag(false, a.microbatch, a.stage + 1, S), config_.wire));
        break;
      }
      case ActionKind::kRecvGradient:
        state.output_grad = Tensor::empty(activation);
        recv(pipe_, state.output_grad.span(), schedule_.rank_of(a.stage + 1), message_tag(true, a.microbatch, a.stage, S),
             config_.wire);
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput: {
        std::optional<DeferWeightGradients> defer;
        if (a.kind == ActionKind::kBackwardInput) defer.emplace(state.weights);
        if (a.stage == S - 1) state.output.backward();
        else run_backward(state.output, state.output_grad);
        state.output = state.output_grad = Tensor();  // the stage's activations go with its graph
        break;
      }
      case ActionKind::kBackwardWeight:
        state.weights.run();
        break;
      case ActionKind::kSendGradient: {
        const Tensor g = state.input.grad();
        sends.emplace_back(g, send_async(pipe_, g.span(), schedule_.rank_of(a.stage - 1),
                                         message_tag(true, a.microbatch, a.stage - 1, S), config_.wire));
        state.input = Tensor();
        break;
      }
    }
  }
  for (auto& send : sends) send.second.wait();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sync_tied_embedding();
  // The last stage's loss to every pipe rank, with each rank's idle fraction of the schedule.
  std::array<float, 2> sums{loss, static_cast<float>(elapsed > 0 ? 1.0 - compute / elapsed : 0.0)};
  all_reduce(pipe_, sums);
  bubble_ = sums[1] / static_cast<float>(pipe_.size());
  return sums[0];
}

// Megatron's embedding group: the first and the last stage exchange the tied
// embedding's gradient and each adds the other's (a + b == b + a, bit for bit).
void PipelineParallel::sync_tied_embedding() {
  const int first = 0, last = pipe_.size() - 1;
  const int here = pipe_.rank();
  const bool holds_first = here == first, holds_last = here == schedule_.rank_of(schedule_.num_stages() - 1);
  if (!tied(model_.config) || schedule_.num_stages() == 1 || holds_first == holds_last) return;
  Tensor grad = model_.wte.weight.grad();
  SL_ASSERT(grad.defined(), "tied embedding without a gradient on pipe rank " + std::to_string(here));
  Tensor other = Tensor::empty(grad.shape());
  const int peer = holds_first ? last : first;
  CollectiveHandle h = send_async(pipe_, grad.span(), peer, kTiedEmbeddingTag);
  recv(pipe_, other.span(), peer, kTiedEmbeddingTag);
  h.wait();
  std::span<float> g = grad.span();
  const std::span<const float> o = other.span();
  for (size_t i = 0; i < g.size(); ++i) g[i] += o[i];
}

Shape PipelineParallel::message_shape(int64_t rows, int64_t seq_len) const {
  return {rows / config_.microbatches / config_.sequence_split, seq_len, model_.config.d_model};
}

int64_t PipelineParallel::message_bytes(int64_t rows, int64_t seq_len) const {
  return wire_bytes(config_.wire, numel_of(message_shape(rows, seq_len)));
}

std::string PipelineParallel::describe() const {
  std::string s = "pipeline " + to_string(schedule_.kind) + " over pipe (" + std::to_string(pipe_.size()) + " ranks";
  if (config_.virtual_stages > 1) s += " x " + std::to_string(config_.virtual_stages) + " virtual stages";
  s += "), " + std::to_string(config_.microbatches) + " microbatches, blocks per stage";
  for (size_t i = 0; i + 1 < first_block_.size(); ++i) {
    s += i ? ',' : ' ';
    s += std::to_string(first_block_[i + 1] - first_block_[i]);
  }
  return s;
}

void plan_pipeline_step(StepPlan& plan, const Mesh& mesh) {
  add_planned(plan, mesh, {kPipeAxis, CollectiveOp::kAllReduce, 2 * kBytesPerFloat, "loss and idle time"});
}

}  // namespace shardlab::parallel
