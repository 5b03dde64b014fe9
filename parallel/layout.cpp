#include "parallel/layout.h"

#include <algorithm>

#include "framework/error.h"
#include "parallel/context/context_parallel.h"

namespace shardlab::parallel {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_tensor(const nn::ModelConfig& m, int t) {
  if (t == 1) return;
  const auto fail = [&](const std::string& what, int64_t value) {
    throw UserError("tensor axis " + str(t) + " does not divide " + what + " " + str(value) +
                    "; choose a tensor size that divides it");
  };
  if (m.n_heads % t != 0) fail("the attention heads", m.n_heads);
  if (m.n_kv_heads % t != 0 && t % m.n_kv_heads != 0) {
    throw UserError("tensor axis " + str(t) + " and the " + str(m.n_kv_heads) +
                    " kv heads must divide one another (kv heads split when the tensor size divides them, "
                    "replicated when it is a multiple of them); choose a tensor size that divides " +
                    str(m.n_kv_heads) + " or is a multiple of it");
  }
  if (m.d_ff % t != 0) fail("the MLP hidden size d_ff", m.d_ff);
  if (m.vocab % t != 0) fail("the vocabulary", m.vocab);
}

void check_experts(const LayoutChecks& c, const Layout& l) {
  const nn::ModelConfig& m = c.model;
  if (m.experts > 0 && l.tensor > 1 && l.sequence_parallel) {
    throw UserError("sequence parallelism with a mixture-of-experts model: MoE blocks route whole sequences; "
                    "turn sequence parallelism off (tensor parallelism alone splits the experts)");
  }
  if (l.expert == 1) return;
  if (m.experts == 0) {
    throw UserError("mesh axis expert=" + str(l.expert) + " needs a mixture-of-experts model; add --experts E "
                    "(a multiple of " + str(l.expert) + ") or use a -moe- preset");
  }
  if (m.experts % l.expert != 0) {
    throw UserError("expert axis " + str(l.expert) + " does not divide the " + str(m.experts) +
                    " experts; choose an expert size that divides --experts");
  }
}

void check_pipeline(const LayoutChecks& c, const Layout& l) {
  const int p = l.pipe, v = l.virtual_stages, stages = p * v;
  const int64_t L = c.model.n_layers;
  if (p == 1) {
    if (v > 1 || !c.pipeline_layers.empty()) {
      throw UserError("virtual stages and a layer split need a pipe axis; add pipe=N to the mesh");
    }
    return;
  }
  if (l.zero == 3) {
    throw UserError("ZeRO-3 with pipe=" + str(p) + " would gather every stage's parameters again for each of the "
                    "pipeline's microbatches; use ZeRO stage 1 or 2 with a pipe axis");
  }
  if (L < stages) {
    throw UserError("the model's " + str(L) + " layers cannot fill pipe x virtual stages = " + str(p) + " x " + str(v) +
                    " = " + str(stages) + " stages; use fewer stages or more layers");
  }
  if (!c.pipeline_layers.empty()) {
    int64_t sum = 0;
    bool positive = true;
    for (int64_t n : c.pipeline_layers) sum += n, positive = positive && n > 0;
    if (static_cast<int>(c.pipeline_layers.size()) != stages || sum != L || !positive) {
      throw UserError("the layer split gives " + str(c.pipeline_layers.size()) + " stages summing to " + str(sum) +
                      " layers; give " + str(stages) + " positive counts (pipe x virtual stages) summing to the model's " +
                      str(L) + " layers");
    }
  }
  check(make_pipeline_schedule(l.schedule, p, v, l.microbatches));
}

void check_context(const LayoutChecks& c, const Layout& l) {
  if (l.context == 1) return;
  if (c.seq_len > 0) SequenceSplit{.size = l.context, .load_balance = c.context_load_balance}.check_length(c.seq_len);
  if (c.model.experts > 0 && c.model.capacity_factor != 0.0f) {
    throw UserError("context=" + str(l.context) + " with an MoE capacity factor of " +
                    std::to_string(c.model.capacity_factor) + ": a capacity counts a whole sequence's tokens in "
                    "order, which no rank holds; use --capacity-factor 0 (dropless) with a context axis");
  }
}

}  // namespace

Layout Layout::from_spec(const std::string& spec) { return from_axes(parse_mesh_spec(spec)); }

Layout Layout::from_axes(std::vector<AxisSpec> axes) {
  // Every layout has data ranks, one at least: "tensor=2" means "data=1,tensor=2".
  const bool has_data = std::any_of(axes.begin(), axes.end(), [](const AxisSpec& a) {
    return a.name == kDataAxis || a.name == kFsdpAxis;
  });
  if (!has_data) axes.insert(axes.begin(), {kDataAxis, 1});
  Layout l;
  for (const AxisSpec& a : axes)
    if (int* d = l.degree(a.name)) *d = a.size;
  l.axes = std::move(axes);
  return l;
}

void Layout::validate(const LayoutChecks& c) const {
  if (zero < 0 || zero > 3) throw UserError("ZeRO stage " + str(zero) + " must be 0, 1, 2 or 3");
  check_experts(c, *this);
  check_tensor(c.model, tensor);
  check_context(c, *this);
  if (tp_overlap && !sequence_parallel) {
    throw UserError("the collective matmul (tp overlap) hides the all_gathers of sequence parallelism; "
                    "turn sequence parallelism on with it");
  }
  if (microbatches < 1) throw UserError("microbatches per step must be at least 1, got " + str(microbatches));
  if (c.int8_gradients && data * fsdp * context * expert == 1) {
    throw UserError("--reduce-dtype int8 compresses gradient reductions over the data, fsdp, context and expert "
                    "axes, and mesh " + describe() + " has one rank over them, so no gradient is ever reduced (its "
                    "error feedback would hold memory for nothing); drop --reduce-dtype or add a data axis");
  }
  check_pipeline(c, *this);
  if (c.global_batch > 0) {
    if (c.global_batch % data_ranks() != 0) {
      throw UserError("global batch " + str(c.global_batch) + " is not divisible by the " + str(data_ranks()) +
                      " ranks that split it (data x fsdp x expert = " + str(data) + " x " + str(fsdp) + " x " +
                      str(expert) + "); choose a batch that is a multiple of " + str(data_ranks()));
    }
    const int64_t per_rank = c.global_batch / data_ranks();
    if (per_rank % microbatches != 0) {
      throw UserError(str(per_rank) + " sequences per data rank do not split into " + str(microbatches) +
                      " equal microbatches; choose a batch that is a multiple of " +
                      str(static_cast<int64_t>(data_ranks()) * microbatches));
    }
    const int64_t micro = per_rank / microbatches;
    if (sequence_parallel && micro % tensor != 0) {
      throw UserError("sequence parallelism splits each microbatch's " + str(micro) + " sequences over the tensor axis " +
                      str(tensor) + "; choose a batch that is a multiple of " +
                      str(static_cast<int64_t>(data_ranks()) * microbatches * tensor));
    }
  }
}

void Layout::validate(const LayoutChecks& checks, int num_ranks) const {
  validate_mesh(axes, num_ranks);
  validate(checks);
}

std::string Layout::describe() const {
  if (!axes.empty()) return axis_sizes_string(axes);
  std::vector<AxisSpec> named;  // built from degrees: the non-trivial axes in kAxisNames' order
  for (const std::string& name : kAxisNames) {
    const int size = *degree(name);
    if (size > 1 || (name == kDataAxis && fsdp == 1)) named.push_back({name, size});
  }
  return axis_sizes_string(named);
}

}  // namespace shardlab::parallel
