#include "parallel/fsdp/fsdp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/memory.h"
#include "framework/ops/wire_format.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/data_parallel/error_feedback.h"
#include "parallel/data_parallel/sharded_io.h"

namespace shardlab::parallel {
namespace {

struct Unit {
  Unit(FlatLayout l, int64_t experts_from) : layout(std::move(l)), experts_from(experts_from) {}
  FlatLayout layout;
  int64_t experts_from;           // flat offset where expert-parallel experts begin (they come last)
  Tensor shard;                   // this rank's slice of the parameters: the only persistent copy
  std::shared_ptr<Storage> full;  // the gathered parameters, while present
  CollectiveHandle gathering;     // an all_gather into `full` (or `wire`) still in flight
  Bf16Array shard_wire, wire;     // a bf16 policy's gather: the shard sent and the unit received, in bf16
  bool bound = false;             // parameters point into `full`
  Tensor grad_flat, grad_slice;
  CollectiveHandle reducing;
  size_t ready = 0;
  bool launched = false;
};

class FullyShardedDataParallel : public GradientSync {
 public:
  FullyShardedDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                           const ModelSplit& split);
  ~FullyShardedDataParallel() override;
  void set_sync(bool sync) override { sync_ = sync; }
  void begin_microbatch() override { ensure_gathered(*units_[0]); }
  void finish_gradients() override;
  optim::ParamViews local_parameters() override;
  // Each rank counts its own shard of the gradients.
  const AxisGroup* gradient_shard_group() const override { return axes_.shard; }
  void zero_grad() override;
  void gather_full_params() override;
  void release_full_params() override;
  void save(CheckpointSink* writer, const optim::Optimizer& optimizer) override;
  void load(const CheckpointReader& reader, const optim::Optimizer& optimizer) override;
  std::string describe() const override;

 private:
  void start_gather(Unit& u);
  void ensure_gathered(Unit& u);
  void release(Unit& u);
  void on_grad_ready(Unit& u, bool is_root);
  void launch_reduce(Unit& u);
  // A block's forward hooks: gather its parameters (prefetch the next block's) before it
  // runs; release them after, and gather them again when its gradient arrives.
  Tensor before_block(size_t unit, const Tensor& x);
  Tensor after_block(size_t unit, const Tensor& y);

  nn::Transformer& model_;
  DataAxes axes_;
  std::vector<std::unique_ptr<Unit>> units_;  // 0: root, 1 + l: block l
  bool sync_ = true;
  bool hold_full_ = false;
  bool reshard_after_forward_;
  bool overlap_;  // prefetch gathers and reduce during backward (else each when needed, at the end)
  DType param_dtype_;   // what the parameter gathers carry
  DType reduce_dtype_;  // what the gradient reductions carry
  ErrorFeedback feedback_;  // under an int8 wire: a unit's reduce_scatter (part 0), its copies' all_reduces
  ParamIO io_;
};

// Unit 1 + l: the parameters of block module l; unit 0, the root: every other parameter.
// Units are taken from the modules, names from the whole model. Within a unit the
// expert-parallel experts come last, so that a shard's dense part is contiguous.
std::vector<FlatLayout> fsdp_units(nn::Transformer& model, int shards, const std::set<std::string>& experts) {
  std::map<const Tensor*, size_t> unit_of;
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    for (const nn::Parameter& p : model.blocks[l]->parameters()) unit_of[p.tensor] = l + 1;
  }
  std::vector<std::vector<FlatLayout::Param>> params(model.blocks.size() + 1);
  for (const nn::Parameter& p : model.parameters()) {
    const auto it = unit_of.find(p.tensor);
    params[it == unit_of.end() ? 0 : it->second].push_back({p.name, *p.tensor, p.decay});
  }
  std::vector<FlatLayout> units;
  for (auto& unit : params) {
    std::stable_partition(unit.begin(), unit.end(), [&](const FlatLayout::Param& p) { return !experts.contains(p.name); });
    units.emplace_back(unit, shards);
  }
  return units;
}

// Where a unit's experts begin: its first expert entry, or the end of the padded buffer.
int64_t experts_from(const FlatLayout& layout, const std::set<std::string>& experts) {
  for (const FlatEntry& e : layout.entries()) {
    if (experts.contains(e.name)) return e.offset;
  }
  return layout.padded();
}

// The parts of this rank's gradient slice [lo, hi) of a unit and where each has copies:
// the dense part over dense_replica, the experts over replica (either may be null or empty).
template <typename Fn>
void for_each_replicated_part(const FlatLayout& layout, int64_t experts_begin, int rank, const DataAxes& axes, Fn fn) {
  const int64_t lo = layout.slice_begin(rank), hi = layout.slice_end(rank);
  const int64_t split = std::clamp(experts_begin, lo, hi);
  if (axes.dense_replica && split > lo) fn(*axes.dense_replica, int64_t{0}, split - lo);
  if (axes.replica && hi > split) fn(*axes.replica, split - lo, hi - split);
}

FullyShardedDataParallel::FullyShardedDataParallel(nn::Transformer& model, const Mesh& mesh,
                                                   const DataParallelConfig& config, const ModelSplit& split)
    : model_(model), axes_(DataAxes::of(mesh)), reshard_after_forward_(config.reshard_after_forward),
      overlap_(config.overlap),
      param_dtype_(config.param_dtype),
      reduce_dtype_(config.reduce_dtype),
      feedback_(config.reduce_dtype),
      io_(split.shards) {
  const int rank = axes_.shard->rank();
  for (FlatLayout& layout : fsdp_units(model, axes_.shard->size(), split.expert_parameters)) {
    const int64_t begin = experts_from(layout, split.expert_parameters);
    units_.push_back(std::make_unique<Unit>(std::move(layout), begin));
  }
  // Each rank's slice comes from the model's values or, for a deferred model, straight
  // from the initialisers: the full model never exists on any rank.
  std::map<std::string, nn::Parameter> by_name;
  for (const nn::Parameter& p : model.parameters()) by_name.emplace(p.name, p);
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = *units_[i];
    const int64_t lo = u.layout.slice_begin(rank), hi = u.layout.slice_end(rank);
    {
      MemoryScope scope(MemoryCategory::Parameters);
      u.shard = Tensor::zeros({hi - lo});
    }
    u.layout.for_each_overlap(lo, hi, [&](const FlatEntry& e, int64_t a, int64_t b) {
      float* dst = u.shard.data() + (a - lo);
      if (e.param.has_storage()) {
        std::memcpy(dst, e.param.data() + (a - e.offset), (b - a) * sizeof(float));
      } else {
        nn::initialize_range(by_name.at(e.name), config.seed, a - e.offset, b - e.offset, dst);
      }
    });
    for (const FlatEntry& e : u.layout.entries()) {
      Tensor p = e.param;
      p.release_storage();
      p.add_grad_hook([this, &u, i](Tensor&) { on_grad_ready(u, i == 0); });
    }
  }
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    model.blocks[l]->add_forward_pre_hook([this, l](const Tensor& x) { return before_block(l + 1, x); });
    model.blocks[l]->add_forward_hook([this, l](const Tensor& y) { return after_block(l + 1, y); });
  }
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  for (auto& block : model_.blocks) block->clear_forward_hooks();
}

// Under a bf16 policy the shard travels as bf16 (half the bytes) and is widened into
// `full` once it has arrived: the parameters then hold exactly the bf16 values a layout
// holding them in fp32 computes with (ops/bf16.h, compute_value).
void FullyShardedDataParallel::start_gather(Unit& u) {
  if (u.full || u.wire.defined()) return;
  MemoryScope scope(MemoryCategory::Communication);
  if (param_dtype_ == DType::kBF16) {
    u.shard_wire = Bf16Array::of(u.shard.data(), u.shard.numel());
    u.wire = Bf16Array(u.layout.padded());
    u.gathering = all_gather_async(*axes_.shard, std::span<const Bf16>(u.shard_wire.data(), u.shard_wire.numel()),
                                   std::span<Bf16>(u.wire.data(), u.wire.numel()));
    return;
  }
  // fp32, or int8 (--gather-dtype int8, ZeRO++'s quantised weights): every rank, this one
  // included, then computes with the values the int8 blocks carry; the shard stays fp32.
  u.full = std::make_shared<Storage>(u.layout.padded());
  u.gathering = all_gather_async(*axes_.shard, u.shard.span(), {u.full->data(), static_cast<size_t>(u.layout.padded())},
                                 Algorithm::kAuto, param_dtype_);
}

void FullyShardedDataParallel::ensure_gathered(Unit& u) {
  start_gather(u);
  blocking([&] { u.gathering.wait(); });
  if (u.wire.defined()) {
    MemoryScope scope(MemoryCategory::Communication);
    u.full = std::make_shared<Storage>(u.layout.padded());
    u.wire.to_float(u.full->data());
    u.wire = Bf16Array();
    u.shard_wire = Bf16Array();
  }
  if (u.bound) return;
  for (const FlatEntry& e : u.layout.entries()) Tensor(e.param).share_storage(u.full, e.offset);
  u.bound = true;
}

void FullyShardedDataParallel::release(Unit& u) {
  if (hold_full_ || !(u.full || u.wire.defined())) return;
  u.gathering.wait();
  u.wire = Bf16Array();
  u.shard_wire = Bf16Array();
  for (const FlatEntry& e : u.layout.entries()) Tensor(e.param).release_storage();
  u.full.reset();
  u.bound = false;
}

Tensor FullyShardedDataParallel::before_block(size_t i, const Tensor& x) {
  ensure_gathered(*units_[i]);
  if (overlap_ && i + 1 < units_.size()) start_gather(*units_[i + 1]);  // prefetch the next block
  return x;
}

Tensor FullyShardedDataParallel::after_block(size_t i, const Tensor& y) {
  Unit& u = *units_[i];
  // Reshard after forward (gathered again when the gradient arrives) unless told to keep
  // the parameters; without a backward to come they are never kept.
  if (reshard_after_forward_ || !grad_enabled()) release(u);
  // forward: identity; backward: gather this block's parameters (prefetch the previous one).
  return record(y.detach(), "fsdp_gather_for_backward", {y}, [this, i](const Tensor& gy) {
    ensure_gathered(*units_[i]);
    if (overlap_ && i > 1) start_gather(*units_[i - 1]);
    return std::vector<Tensor>{gy};
  });
}

void FullyShardedDataParallel::on_grad_ready(Unit& u, bool is_root) {
  for (auto& other : units_) other->reducing.test();  // keep earlier reductions moving
  if (++u.ready < u.layout.entries().size()) return;
  u.ready = 0;
  if (sync_ && overlap_) launch_reduce(u);
  if (!is_root) release(u);
}

void FullyShardedDataParallel::launch_reduce(Unit& u) {
  {
    MemoryScope scope(MemoryCategory::Communication);
    u.grad_flat = Tensor::empty({u.layout.padded()});
  }
  u.layout.pack_grads(u.grad_flat.span());
  for (const FlatEntry& e : u.layout.entries()) Tensor(e.param).zero_grad();
  {
    MemoryScope scope(MemoryCategory::Gradients);
    u.grad_slice = Tensor::empty({u.layout.shard_size()});
  }
  u.reducing = reduce_scatter_async(
      *axes_.shard, u.grad_flat.span(), u.grad_slice.span(), Algorithm::kAuto, reduce_dtype_,
      feedback_.residual(&u, 0, *axes_.shard, CollectiveOp::kReduceScatter, u.layout.padded()));
  u.launched = true;
}

void FullyShardedDataParallel::finish_gradients() {
  const float mean = 1.0f / static_cast<float>(axes_.all->size());
  // Reductions backward did not start (all of them without overlap; a unit whose
  // parameters got no gradient) start now, in the order backward would have started them.
  for (size_t i = units_.size(); i-- > 1;) {
    if (!units_[i]->launched) launch_reduce(*units_[i]);
  }
  if (!units_[0]->launched) launch_reduce(*units_[0]);
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = *units_[i];
    blocking([&] { u.reducing.wait(); });
    u.grad_flat = Tensor();
    // A shard's copies: other shard groups (hybrid), and for dense parameters under expert
    // parallelism, the expert axis.
    for_each_replicated_part(u.layout, u.experts_from, axes_.shard->rank(), axes_,
                             [&](const AxisGroup& copies, int64_t offset, int64_t count) {
                               const std::span<float> residual =
                                   feedback_.residual(&u, 1 + offset, copies, CollectiveOp::kAllReduce, count);
                               blocking([&] {
                                 all_reduce(copies, u.grad_slice.span().subspan(offset, count), ReduceOp::kSum,
                                            Algorithm::kAuto, reduce_dtype_, residual);
                               });
                             });
    for (float& g : u.grad_slice.span()) g *= mean;
  }
  release(*units_[0]);
}

// This rank's shard of every unit: the only persistent copy of those parameters, and
// their gradient slice.
optim::ParamViews FullyShardedDataParallel::local_parameters() {
  optim::ParamViews views;
  const int rank = axes_.shard->rank();
  for (auto& u : units_) {
    const int64_t lo = u->layout.slice_begin(rank), hi = u->layout.slice_end(rank);
    const std::span<float> grads = u->grad_slice.defined() ? u->grad_slice.span() : std::span<float>{};
    u->layout.for_each_overlap(lo, hi, [&](const FlatEntry& e, int64_t a, int64_t b) {
      const std::span<float> grad = grads.empty() ? grads : grads.subspan(a - lo, b - a);
      io_.add_views(views, e.name, u->shard.span().subspan(a - lo, b - a), grad, a - e.offset, e.decay);
    });
  }
  return views;
}

void FullyShardedDataParallel::zero_grad() {
  for (auto& u : units_) {
    u->grad_slice = Tensor();
    u->grad_flat = Tensor();
    u->launched = false;
    u->ready = 0;
    for (const FlatEntry& e : u->layout.entries()) Tensor(e.param).zero_grad();
  }
}

void FullyShardedDataParallel::gather_full_params() {
  for (auto& u : units_) ensure_gathered(*u);
  hold_full_ = true;
}

void FullyShardedDataParallel::release_full_params() {
  hold_full_ = false;
  for (auto& u : units_) release(*u);
}

void FullyShardedDataParallel::save(CheckpointSink* writer, const optim::Optimizer& optimizer) {
  const bool writes = axes_.expert_data->rank() == 0;  // each expert rank writes its experts
  for (auto& u : units_) {
    save_sharded(*axes_.shard, u->layout, u->shard.span(), "params/", io_, writes, writer);
    save_sharded_state(*axes_.shard, u->layout, optimizer, io_, writes, writer);
  }
}

void FullyShardedDataParallel::load(const CheckpointReader& reader, const optim::Optimizer& optimizer) {
  const int rank = axes_.shard->rank();
  for (auto& u : units_) {
    load_sharded(reader, u->layout, rank, "params/", io_, u->shard.span());
    load_sharded_state(reader, u->layout, rank, io_, optimizer);
  }
}

std::string FullyShardedDataParallel::describe() const {
  return "ZeRO-3/FSDP over " + axes_.all->name() + " (" + std::to_string(axes_.all->size()) + " ranks), " +
         std::to_string(units_.size()) + " units (root + one per block), shards over " + axes_.shard->name() +
         (axes_.replica ? ", replicated over " + axes_.replica->name() : "") +
         (axes_.dense_replica && axes_.dense_replica != axes_.replica
              ? ", dense parameters replicated over " + axes_.dense_replica->name()
              : "");
}

}  // namespace

StepPlan plan_fsdp_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                        const ModelSplit& split, int microbatches) {
  const DataAxes axes = DataAxes::of(mesh);
  const std::vector<FlatLayout> units = fsdp_units(model, axes.shard->size(), split.expert_parameters);
  const size_t blocks = units.size() - 1;
  StepPlan plan;
  const std::string& shard = axes.shard->name();
  // What each can hide behind: a gather prefetched while the previous block computes;
  // the step's first gathers (root, block 0 forward, the last block again for backward)
  // and its last reductions (block 0, root) have nothing left to overlap.
  const auto gather = [&](size_t i, const char* when, Hides hides) {
    add_planned(plan, mesh, {shard, CollectiveOp::kAllGather, wire_bytes(config.param_dtype, units[i].padded()),
                             i == 0 ? std::string("params root") : "params block " + std::to_string(i - 1) + when, hides});
  };
  const auto reduce = [&](size_t i) {
    add_planned(plan, mesh, {shard, CollectiveOp::kReduceScatter, wire_bytes(config.reduce_dtype, units[i].padded()),
                             i == 0 ? std::string("grads root") : "grads block " + std::to_string(i - 1),
                             i > 1 ? Hides::kBackward : Hides::kNothing});
  };
  for (int m = 0; m < microbatches; ++m) {
    const bool sync = m == microbatches - 1;
    if (m == 0) gather(0, "", Hides::kNothing);  // the root stays gathered until the step's gradients are reduced
    for (size_t i = 1; i <= blocks; ++i) {  // block l prefetches l + 1
      gather(i, " (forward)", i > 1 ? Hides::kForward : Hides::kNothing);
    }
    // Backward of block l: gather l again (resharded) and prefetch l - 1, then reduce l.
    for (size_t i = blocks; i >= 1; --i) {
      if (config.reshard_after_forward) {
        if (i == blocks) gather(i, " (backward)", Hides::kNothing);
        if (i > 1) gather(i - 1, " (backward)", Hides::kBackward);
      }
      if (sync && config.overlap) reduce(i);
    }
    for (size_t i = blocks; sync && !config.overlap && i >= 1; --i) reduce(i);  // all after backward
    if (sync) reduce(0);  // the tied embedding's gradient is complete last
  }
  for (size_t i = 0; i < units.size(); ++i) {
    const std::string what = (i == 0 ? std::string("grads root") : "grads block " + std::to_string(i - 1)) + ", this shard";
    for_each_replicated_part(units[i], experts_from(units[i], split.expert_parameters), axes.shard->rank(), axes,
                             [&](const AxisGroup& copies, int64_t, int64_t count) {
                               add_planned(plan, mesh, {copies.name(), CollectiveOp::kAllReduce,
                                                        wire_bytes(config.reduce_dtype, count), what});
                             });
  }
  add_planned(plan, mesh, {shard, CollectiveOp::kAllReduce, kBytesPerFloat, "gradient norm"});
  return plan;
}

std::unique_ptr<GradientSync> make_fsdp(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config,
                                        const ModelSplit& split) {
  return std::make_unique<FullyShardedDataParallel>(model, mesh, config, split);
}

}  // namespace shardlab::parallel
