#include "parallel/data_parallel/data_parallel.h"

#include <cmath>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/memory.h"
#include "optim/clip.h"
#include "optim/sgd.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm_context.h"
#include "parallel/data_parallel/sharded_adamw.h"
#include "parallel/data_parallel/sharded_io.h"

namespace shardlab::parallel {
namespace {

// Gradient buckets of stages 0-2: the parameters in reverse registration order (roughly
// the order backward produces their gradients), a bucket closed once it holds bucket_mb.
std::vector<FlatLayout> gradient_buckets(const std::vector<nn::Parameter>& params, double bucket_mb, int shards) {
  const int64_t bucket_elems = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * (1 << 20) / sizeof(float)));
  std::vector<FlatLayout> buckets;
  std::vector<FlatLayout::Param> pending;
  int64_t pending_elems = 0;
  auto close_bucket = [&] {
    if (pending.empty()) return;
    buckets.emplace_back(pending, shards);
    pending.clear();
    pending_elems = 0;
  };
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    pending.push_back({it->name, *it->tensor, it->decay});
    pending_elems += it->tensor->numel();
    if (pending_elems >= bucket_elems) close_bucket();
  }
  close_bucket();
  return buckets;
}

// What BucketedDataParallel issues in one step (see the class): the bucket reductions of
// the last microbatch, launched from backward (or all after it without overlap), the
// replica all_reduces of a hybrid ZeRO-2, the norm of stage 2's sharded gradients, and
// stages 1-2's parameter all_gathers in the optimizer step.
StepPlan plan_bucketed(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c) {
  const DataAxes axes = DataAxes::of(mesh);
  const int stage = c.zero;
  const std::vector<FlatLayout> buckets =
      gradient_buckets(model.parameters(), c.bucket_mb, stage == 0 ? 1 : axes.shard->size());
  StepPlan plan;
  const auto reduce = [&](size_t i) {
    const FlatLayout& b = buckets[i];
    const std::string what = "grads bucket " + std::to_string(i);
    if (stage == 2) {
      add_planned(plan, mesh, {axes.shard->name(), CollectiveOp::kReduceScatter, b.padded() * kBytesPerFloat, what});
    } else {
      add_planned(plan, mesh, {axes.all->name(), CollectiveOp::kAllReduce, b.padded() * kBytesPerFloat, what});
    }
  };
  const auto replica = [&](size_t i) {
    if (stage == 2 && axes.replica) {
      add_planned(plan, mesh, {axes.replica->name(), CollectiveOp::kAllReduce, buckets[i].shard_size() * kBytesPerFloat,
                               "grads bucket " + std::to_string(i) + ", this shard"});
    }
  };
  for (size_t i = 0; i < buckets.size(); ++i) {
    reduce(i);
    if (!c.overlap) replica(i);
  }
  for (size_t i = 0; i < buckets.size() && c.overlap; ++i) replica(i);
  if (stage == 2) add_planned(plan, mesh, {axes.shard->name(), CollectiveOp::kAllReduce, kBytesPerFloat, "gradient norm"});
  for (size_t i = 0; i < buckets.size() && stage > 0; ++i) {
    add_planned(plan, mesh, {axes.shard->name(), CollectiveOp::kAllGather, buckets[i].padded() * kBytesPerFloat,
                             "params bucket " + std::to_string(i)});
  }
  return plan;
}

// Stages 0-2: parameters stay whole on every rank; gradients travel in buckets.
class BucketedDataParallel : public DataParallel {
 public:
  BucketedDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& config);
  void begin_microbatch(int index, int count) override { sync_ = index == count - 1; }
  void finish_gradients() override;
  double clip_grad_norm(double max_norm) override;
  void step(float lr) override;
  void zero_grad() override;
  void save(CheckpointWriter* writer) override;
  void load(const CheckpointReader& reader) override;
  int64_t optimizer_step() const override { return sharded_ ? sharded_->step_count() : full_->step_count(); }
  std::string describe() const override;

 private:
  struct Bucket {
    explicit Bucket(FlatLayout l) : layout(std::move(l)) {}
    FlatLayout layout;
    size_t ready = 0;
    Tensor flat;         // packed gradients in flight (stage 0, 1: all averaged grads after finish)
    Tensor grad_slice;   // stage 2: this rank's slice of the reduced gradients
    CollectiveHandle handle;
  };
  void on_grad_ready(Bucket& bucket);
  void launch(Bucket& bucket);
  void progress();

  DataAxes axes_;
  int stage_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<nn::Parameter> params_;
  std::unique_ptr<optim::Optimizer> full_;     // stage 0
  std::unique_ptr<ShardedAdamW> sharded_;      // stages 1, 2
  bool sync_ = true;
  bool overlap_;
  // Stage 0 on one data rank has nothing to exchange: gradients stay where backward put
  // them (size-1 axes cost nothing, not even the packing copies).
  bool pack_;
  int in_flight_ = 0;
  ParamIO io_;
};

BucketedDataParallel::BucketedDataParallel(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c)
    : axes_(DataAxes::of(mesh)), stage_(c.zero), params_(model.parameters()), overlap_(c.overlap),
      pack_(stage_ > 0 || axes_.all->size() > 1), io_(c.model_shards) {
  for (FlatLayout& layout : gradient_buckets(params_, c.bucket_mb, stage_ == 0 ? 1 : axes_.shard->size())) {
    buckets_.push_back(std::make_unique<Bucket>(std::move(layout)));
  }
  for (auto& bucket : buckets_) {
    Bucket* b = bucket.get();
    for (const FlatEntry& e : b->layout.entries()) {
      Tensor p = e.param;
      p.add_grad_hook([this, b](Tensor&) { on_grad_ready(*b); });
    }
  }
  if (stage_ == 0) {
    std::vector<std::pair<std::string, Tensor>> named;
    for (const nn::Parameter& p : params_) named.emplace_back(p.name, *p.tensor);
    if (c.optimizer == "sgd") full_ = std::make_unique<optim::SGD>(named, optim::SGDOptions{.momentum = c.momentum});
    else full_ = std::make_unique<optim::AdamW>(named, c.adamw);
  } else {
    std::vector<const FlatLayout*> groups;
    for (auto& b : buckets_) groups.push_back(&b->layout);
    sharded_ = std::make_unique<ShardedAdamW>(groups, axes_.shard->rank(), c.adamw);
  }
}

void BucketedDataParallel::on_grad_ready(Bucket& b) {
  if (!pack_) return;
  progress();
  if (sync_ && ++b.ready == b.layout.entries().size() && overlap_) launch(b);
}

void BucketedDataParallel::launch(Bucket& b) {
  b.ready = 0;
  {
    // Stages 0 and 1 keep the whole averaged gradient here until the step: it is gradient
    // memory. Stage 2 keeps only its slice; the full buffer is a transient send buffer.
    MemoryScope scope(stage_ == 2 ? MemoryCategory::Communication : MemoryCategory::Gradients);
    b.flat = Tensor::empty({b.layout.padded()});
  }
  b.layout.pack_grads(b.flat.span());
  // The packed copy is what travels; the per-parameter gradients are not needed past here
  // (stage 0 writes the averaged values back into them at finish_gradients).
  for (const FlatEntry& e : b.layout.entries()) Tensor(e.param).zero_grad();
  if (stage_ == 2) {
    MemoryScope scope(MemoryCategory::Gradients);
    b.grad_slice = Tensor::empty({b.layout.shard_size()});
    b.handle = reduce_scatter_async(*axes_.shard, b.flat.span(), b.grad_slice.span());
  } else {
    b.handle = all_reduce_async(*axes_.all, b.flat.span());
  }
  ++in_flight_;
}

void BucketedDataParallel::progress() {
  if (in_flight_ == 0) return;
  for (auto& b : buckets_) b->handle.test();
}

void BucketedDataParallel::finish_gradients() {
  if (!pack_) return;
  const float mean = 1.0f / static_cast<float>(axes_.all->size());
  for (auto& bucket : buckets_) {
    Bucket& b = *bucket;
    if (!b.flat.defined() && !b.grad_slice.defined()) launch(b);  // not overlapped, or a parameter got no gradient
    blocking([&] { b.handle.wait(); });
    if (stage_ == 2) {
      b.flat = Tensor();
      if (axes_.replica) blocking([&] { all_reduce(*axes_.replica, b.grad_slice.span()); });
      for (float& g : b.grad_slice.span()) g *= mean;
    } else if (stage_ == 1) {
      for (float& g : b.flat.span()) g *= mean;
    } else {
      b.layout.unpack_grads(b.flat.span(), mean);
      b.flat = Tensor();
    }
  }
  in_flight_ = 0;
}

double BucketedDataParallel::clip_grad_norm(double max_norm) {
  std::vector<optim::GradSpan> grads;
  if (stage_ == 0) {
    for (const nn::Parameter& p : params_) {
      Tensor g = p.tensor->grad();
      if (g.defined()) io_.add_grad_spans(grads, p.name, g.span());
    }
  }
  // Stage 1 holds the whole averaged gradient on every rank; stage 2 only a slice of it.
  for (auto& bucket : buckets_) {
    if (stage_ == 0) break;
    Bucket& b = *bucket;
    const auto [lo, hi] = stage_ == 1 ? std::pair<int64_t, int64_t>{0, b.layout.padded()} : b.layout.slice(axes_.shard->rank());
    std::span<float> flat = stage_ == 1 ? b.flat.span() : b.grad_slice.span();
    b.layout.for_each_overlap(lo, hi, [&](const FlatEntry& e, int64_t a, int64_t z) {
      io_.add_grad_spans(grads, e.name, flat.subspan(a - lo, z - a), a - e.offset);
    });
  }
  const AxisGroup* sharded = stage_ == 2 ? axes_.shard : nullptr;
  return optim::clip_grad_norm(grads, max_norm, [&](double local) {
    double global = 0.0;
    blocking([&] { global = io_.reduce_norm(local, sharded); });
    return global;
  });
}

void BucketedDataParallel::step(float lr) {
  if (stage_ == 0) return full_->step(lr);
  sharded_->begin_step();
  const int rank = axes_.shard->rank();
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = *buckets_[i];
    const auto [lo, hi] = b.layout.slice(rank);
    MemoryScope scope(MemoryCategory::Communication);
    Tensor full = Tensor::empty({b.layout.padded()});
    b.layout.pack_params(full.span());
    std::span<float> mine = full.span().subspan(lo, hi - lo);
    const std::span<const float> grad = stage_ == 1 ? b.flat.span().subspan(lo, hi - lo) : b.grad_slice.span();
    sharded_->update(i, mine, grad, lr);
    Tensor gathered = Tensor::empty({b.layout.padded()});
    blocking([&] { all_gather(*axes_.shard, mine, gathered.span()); });
    b.layout.unpack_params(gathered.span());
  }
}

void BucketedDataParallel::zero_grad() {
  for (const nn::Parameter& p : params_) p.tensor->zero_grad();
  for (auto& b : buckets_) {
    b->flat = Tensor();
    b->grad_slice = Tensor();
    b->ready = 0;
  }
}

// The parameter an optimizer state tensor belongs to: "m/blocks.0.attn.wo.weight" -> its name.
std::string param_of_state(const std::string& state) { return state.substr(state.find('/') + 1); }

void BucketedDataParallel::save(CheckpointWriter* writer) {
  const bool writes = axes_.all->rank() == 0;
  if (stage_ == 0) {
    if (!writes) return;
    for (const nn::Parameter& p : params_) io_.write(writer, "params/" + p.name, p.name, p.tensor->shape(), p.tensor->span());
    for (const auto& [name, t] : full_->state_tensors()) {
      io_.write(writer, "optim/" + name, param_of_state(name), t.shape(), t.span());
    }
    return;
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (writes) {
      for (const FlatEntry& e : buckets_[i]->layout.entries()) {
        io_.write(writer, "params/" + e.name, e.name, e.param.shape(), e.param.span());
      }
    }
    save_sharded(*axes_.shard, buckets_[i]->layout, sharded_->m(i).span(), "optim/m/", io_, writes, writer);
    save_sharded(*axes_.shard, buckets_[i]->layout, sharded_->v(i).span(), "optim/v/", io_, writes, writer);
  }
}

void BucketedDataParallel::load(const CheckpointReader& reader) {
  for (const nn::Parameter& p : params_) io_.read(reader, "params/" + p.name, p.name, p.tensor->shape(), p.tensor->span());
  if (stage_ == 0) {
    for (const auto& [name, t] : full_->state_tensors()) {
      Tensor dst = t;
      io_.read(reader, "optim/" + name, param_of_state(name), dst.shape(), dst.span());
    }
    full_->set_step_count(reader.int_attribute("optimizer_step"));
    return;
  }
  const int rank = axes_.shard->rank();
  for (size_t i = 0; i < buckets_.size(); ++i) {
    load_sharded(reader, buckets_[i]->layout, rank, "optim/m/", io_, sharded_->m(i).span());
    load_sharded(reader, buckets_[i]->layout, rank, "optim/v/", io_, sharded_->v(i).span());
  }
  sharded_->set_step_count(reader.int_attribute("optimizer_step"));
}

std::string BucketedDataParallel::describe() const {
  std::string s = stage_ == 0 ? "DP" : "ZeRO-" + std::to_string(stage_);
  s += " over " + axes_.all->name() + " (" + std::to_string(axes_.all->size()) + " ranks), " +
       std::to_string(buckets_.size()) + " gradient buckets";
  if (stage_ > 0) s += ", shards over " + axes_.shard->name();
  return s;
}

}  // namespace

DataAxes DataAxes::of(const Mesh& mesh) {
  DataAxes a;
  std::vector<std::string> names;
  for (const char* n : {"data", "fsdp"}) {
    if (mesh.has_axis(n)) names.push_back(n);
  }
  if (names.empty()) throw UserError("the mesh " + mesh.describe() + " has no data or fsdp axis; add data=1");
  a.all = &mesh.group(names);
  const bool hybrid = mesh.has_axis("fsdp") && mesh.axis_size("fsdp") > 1 && mesh.has_axis("data");
  a.shard = hybrid ? &mesh.axis("fsdp") : a.all;
  a.replica = hybrid && mesh.axis_size("data") > 1 ? &mesh.axis("data") : nullptr;
  return a;
}

std::unique_ptr<DataParallel> make_bucketed_data_parallel(nn::Transformer& model, const Mesh& mesh,
                                                          const DataParallelConfig& config) {
  SL_ASSERT(config.zero >= 0 && config.zero <= 2, "bucketed data parallelism covers ZeRO stages 0-2");
  nn::initialize_unallocated(model, config.seed);  // deferred: every rank holds the whole model
  return std::make_unique<BucketedDataParallel>(model, mesh, config);
}

StepPlan plan_bucketed_step(nn::Transformer& model, const Mesh& mesh, const DataParallelConfig& c) {
  return plan_bucketed(model, mesh, c);
}

}  // namespace shardlab::parallel
