// Module: a node in the model tree that owns parameters and child modules.
//
// Parameters get stable hierarchical names from the tree ("blocks.3.attn.wqkv.weight"),
// and each carries its initialiser, so `initialize(model, seed)` fills every parameter
// from the counter-based RNG keyed by (seed, name, global element index): any layout
// that later shards a parameter can fill its slice with exactly the same values.
//
//   struct Mlp : Module {
//     Linear fc{*this, "fc", 256, 1024};          // registers itself as child "fc"
//   };
//   for (auto& [name, p] : model.named_parameters()) ...
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace shardlab::nn {

struct Init {
  enum Kind { Normal, Zeros, Ones } kind = Normal;
  float std = 0.02f;
};

struct Parameter {
  std::string name;  // full hierarchical name, filled in by named_parameters()
  Tensor* tensor;
  Init init;
  bool decay;        // takes weight decay (matrices yes; biases, norms no)
};

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // Every parameter below this module with its full name, in registration order. A slot
  // a strategy has emptied (Tensor(): a pipeline stage drops the layers other stages
  // hold) is not listed.
  std::vector<Parameter> parameters();
  std::vector<std::pair<std::string, Tensor>> named_parameters();
  int64_t num_parameters();
  void zero_grad();  // drops every parameter's gradient

  // Registers `child` under `name` (called by a child's constructor with its parent).
  void add_child_module(Module& child, const std::string& name);
  // The child registered under `name` (one level down), or nullptr.
  Module* child(const std::string& name) const;

  // Forward hooks, registered from outside the model: parallel/ applies its strategies
  // through them (FSDP gathers a block's parameters before it runs; tensor parallelism
  // puts Megatron's f before attention and the MLP). A pre-hook maps the module's input,
  // a post-hook its output, in registration order. Modules that take a tensor honour
  // both; Embedding (it takes ids) honours post-hooks only.
  using Hook = std::function<Tensor(const Tensor&)>;
  void add_forward_pre_hook(Hook hook) { pre_hooks_.push_back(std::move(hook)); }
  void add_forward_hook(Hook hook) { post_hooks_.push_back(std::move(hook)); }
  void clear_forward_hooks();
  bool has_forward_hooks() const { return !pre_hooks_.empty() || !post_hooks_.empty(); }

  // Maps this module's own parameters before each use, given their local name ("weight",
  // "bias"), as torch.nn.utils.parametrize does; unset, they are used as they are. Tensor
  // parallelism puts identity-forward ops here whose backward sums a gradient that ranks
  // hold in parts (shared kv heads, sequence-parallel norms).
  using ParameterHook = std::function<Tensor(const std::string& name, const Tensor& parameter)>;
  ParameterHook parameter_hook;

 protected:
  // Runs `forward` on x between the pre- and post-hooks.
  Tensor forward_hooked(const Tensor& x, const std::function<Tensor(const Tensor&)>& forward) const;
  Tensor post_hooked(Tensor y) const;
  // `parameter` (registered as `name`) through parameter_hook; undefined stays undefined.
  Tensor use(const std::string& name, const Tensor& parameter) const;

  // Allocates a parameter (under MemoryCategory::Parameters) owned by this module.
  Tensor& add_parameter(Tensor& slot, const std::string& name, const Shape& shape, Init init, bool decay);

 private:
  void collect(const std::string& prefix, std::vector<Parameter>& out);
  std::vector<Parameter> own_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<Hook> pre_hooks_, post_hooks_;
};

// Fills every parameter from its initialiser; see the header comment. A parameter that
// has no storage (deferred, see below) is allocated first.
void initialize(Module& model, uint64_t seed);

// Allocates and fills only the parameters that have no storage yet (deferred ones),
// leaving the others -- a strategy's shards, say -- as they are.
void initialize_unallocated(Module& model, uint64_t seed);

// Elements [begin, end) of p's initial values (row-major, global element indices) into
// out[0, end - begin): how a sharded layout fills just its slice, bit-identical to the
// same elements of initialize().
void initialize_range(const Parameter& p, uint64_t seed, int64_t begin, int64_t end, float* out);

// While one is alive on this thread, modules register their parameters with a shape but
// no storage, so that building a model costs no memory. A sharding strategy then
// allocates and fills only what each rank keeps (FSDP: its slice of every unit), and
// initialize() allocates and fills the whole model for any other layout.
//
//   auto model = deferred_transformer(config);  // transformer.h: this guard around make_unique
class DeferParameters {
 public:
  DeferParameters();
  ~DeferParameters();
  DeferParameters(const DeferParameters&) = delete;
  DeferParameters& operator=(const DeferParameters&) = delete;

 private:
  bool outer_;
};

// While one is alive on this thread, initialize_range() -- through which initialize(),
// initialize_unallocated() and every sharding strategy fill a parameter -- writes zeros
// instead of the initialisers' values: for weights about to be read from a checkpoint (a
// resume, generate), a read that overwrites every parameter. Seeding costs seconds at
// GPT-2's size (a normal sample per weight); zeros cost a memset.
//
//   { nn::WeightsLoadedNext loading; parallelize(model, mesh, config); }  load_checkpoint(...);
class WeightsLoadedNext {
 public:
  WeightsLoadedNext();
  ~WeightsLoadedNext();
  WeightsLoadedNext(const WeightsLoadedNext&) = delete;
  WeightsLoadedNext& operator=(const WeightsLoadedNext&) = delete;

 private:
  bool outer_;
};

}  // namespace shardlab::nn
