#include "parallel/runtime/run_config.h"

#include "framework/error.h"
#include "parallel/comm/watchdog.h"
#include "parallel/runtime/precision_choice.h"

namespace shardlab::runtime {
namespace {

int64_t get_int(const Attributes& a, const std::string& key, const std::string& path) {
  auto it = a.find(key);
  if (it == a.end() || !std::holds_alternative<int64_t>(it->second)) {
    throw UserError("checkpoint " + path + " has no integer config attribute '" + key +
                    "'; it was not written by shardlab train_gpt");
  }
  return std::get<int64_t>(it->second);
}

}  // namespace

void RunConfig::validate() const {
  model.validate();
  require_positive("--batch", batch);
  require_positive("--steps", steps);
  require_positive("--grad-accum", grad_accum);
  require_positive("--log-every", log_every);
  if (seq_len < 0 || sequence_length() > model.context) {
    throw UserError("--seq-len " + std::to_string(seq_len) + " must be between 1 and the model context " +
                    std::to_string(model.context));
  }
  if (batch % grad_accum != 0) {
    throw UserError("--batch " + std::to_string(batch) + " is not divisible by --grad-accum " +
                    std::to_string(grad_accum) + "; microbatches must be equal");
  }
  if (optimizer != "adamw" && optimizer != "sgd") {
    throw UserError("unknown --optimizer '" + optimizer + "'; use adamw or sgd");
  }
  if (lr <= 0 || min_lr < 0 || min_lr > lr) {
    throw UserError("learning rates must satisfy 0 <= --min-lr <= --lr and --lr > 0, got --lr " +
                    std::to_string(lr) + " --min-lr " + std::to_string(min_lr));
  }
  if (warmup < -1) {
    throw UserError("--warmup " + std::to_string(warmup) + " must be 0 or more (or -1 for a tenth of --steps)");
  }
  // --precision auto is resolved at start-up (resolve_precision), and validated again then.
  const bool resolved = precision != "auto";
  const DType compute = resolved ? parse_dtype(precision, "--precision") : DType::kF32;
  parse_wire_dtype(reduce_dtype, "--reduce-dtype");  // names the choices
  if (gather_dtype != "auto") {
    const DType gather = parse_wire_dtype(gather_dtype, "--gather-dtype");
    if (resolved && zero < 3 && gather != compute) {
      throw UserError("--gather-dtype " + gather_dtype + " applies to ZeRO-3 (--zero 3, or an fsdp axis), whose "
                      "gathered weights are a compute copy rebuilt every step; under --zero " + std::to_string(zero) +
                      " the gathered slices are every rank's own weights between steps, so they travel in the compute "
                      "dtype (" + precision + "). Use --zero 3, or leave --gather-dtype at auto");
    }
  }
  if (activation_dtype != "auto" && activation_dtype != "fp32" && activation_dtype != "bf16") {
    throw UserError("--activation-dtype '" + activation_dtype + "' must be auto (the compute dtype, " +
                    (resolved ? precision : std::string("chosen at start-up by --precision auto")) +
                    "), fp32 or bf16: activations travel between model-parallel ranks in fp32 or bf16 (int8 is for "
                    "gradients, --reduce-dtype, and ZeRO-3 gathers, --gather-dtype)");
  }
  parallel::parse_context_comm(cp_comm);
  if (!resolved && bf16_matmul != "auto") {
    throw UserError("--bf16-matmul " + bf16_matmul + " applies to --precision bf16, and this run's precision is auto "
                    "(chosen at start-up); give --precision bf16 with it");
  }
  if (resolved) check_bf16_matmul_flag(compute, precision, bf16_matmul);
  if (zero < 0 || zero > 3) throw UserError("--zero " + std::to_string(zero) + " must be 0, 1, 2 or 3");
  if (bucket_mb <= 0) throw UserError("--bucket-mb must be positive, got " + std::to_string(bucket_mb));
  if (eval_every < 0 || ckpt_every < 0) throw UserError("--eval-every and --ckpt-every must not be negative");
  if (threads < 0) throw UserError("--threads must not be negative, got " + std::to_string(threads));
  if (grad_clip < 0) {
    throw UserError("--grad-clip " + std::to_string(grad_clip) + " must be 0 (no clipping) or a positive global norm");
  }
  require_positive("--eval-batches", eval_batches);
  if (on_nonfinite != "stop" && on_nonfinite != "skip") {
    throw UserError("unknown --on-nonfinite '" + on_nonfinite + "'; use stop or skip");
  }
  require_positive("--max-skips", max_skips);
  if (eval_problems < 0) throw UserError("--eval-problems must not be negative, got " + std::to_string(eval_problems));
  parallel::parse_schedule_kind(pp_schedule);  // names the choices
  if (!tokenizer.empty() && data == "arithmetic") {
    throw UserError("--tokenizer needs text --data files: the arithmetic task has its own byte vocabulary");
  }
  if (!val_data.empty() && data == "arithmetic") {
    throw UserError("--val-data needs --data files: the arithmetic task has its own held-out problems");
  }
  parallel::collective_timeout_from_flag(collective_timeout);  // refuses a negative one
  require_positive("--pp-virtual", pp_virtual);
  if (!(adam_beta1 >= 0 && adam_beta1 < 1 && adam_beta2 >= 0 && adam_beta2 < 1 && adam_eps > 0)) {
    throw UserError("AdamW needs 0 <= --adam-beta1, --adam-beta2 < 1 and --adam-eps > 0; got " +
                    std::to_string(adam_beta1) + ", " + std::to_string(adam_beta2) + ", " + std::to_string(adam_eps));
  }
}

Attributes RunConfig::to_attributes() const {
  return {{"arch", nn::arch_name(model.arch)}, {"vocab", model.vocab},   {"context", model.context},
          {"d_model", model.d_model},          {"n_layers", model.n_layers}, {"n_heads", model.n_heads},
          {"n_kv_heads", model.n_kv_heads},    {"d_ff", model.d_ff},     {"data", data},
          {"digits", int64_t{digits}},         {"batch", batch},         {"seq_len", sequence_length()},
          {"optimizer", optimizer},            {"lr", lr},               {"steps", steps},
          {"rope_theta", static_cast<double>(model.rope_theta)}, {"norm_eps", static_cast<double>(model.norm_eps)},
          {"experts", model.experts},          {"top_k", model.top_k},   {"moe_every", model.moe_every},
          {"capacity_factor", static_cast<double>(model.capacity_factor)},
          {"aux_loss_coef", static_cast<double>(model.aux_loss_coef)},
          {"z_loss_coef", static_cast<double>(model.z_loss_coef)},
          {"precision", precision},            {"tokenizer", tokenizer},
          {"shuffle", int64_t{shuffle}}};
}

double RunConfig::watchdog_timeout(double first_step_seconds) const {
  if (collective_timeout > 0) return collective_timeout;
  return first_step_seconds > 0 ? 10 * first_step_seconds + 30 : 300;
}

parallel::DataParallelConfig RunConfig::data_parallel() const {
  return {.zero = zero,
          .bucket_mb = bucket_mb,
          .overlap = overlap,
          .reshard_after_forward = reshard_after_forward,
          .seed = seed};
}

parallel::ParallelConfig RunConfig::parallel() const {
  PrecisionPolicy policy;
  policy.compute = parse_dtype(precision, "--precision");
  policy.reduce = parse_wire_dtype(reduce_dtype, "--reduce-dtype");
  policy.gather = gather_dtype == "auto" ? policy.compute : parse_wire_dtype(gather_dtype, "--gather-dtype");
  policy.activation = activation_dtype == "auto" ? policy.compute : parse_dtype(activation_dtype, "--activation-dtype");
  return {.data = data_parallel(),
          .tensor = {.sequence_parallel = sequence_parallel, .overlap = tp_overlap},
          .pipeline = {.schedule = parallel::parse_schedule_kind(pp_schedule),
                       .virtual_stages = pp_virtual,
                       .microbatches = grad_accum,
                       .layers = pp_layers},
          .context = {.comm = parallel::parse_context_comm(cp_comm), .load_balance = cp_load_balance},
          .precision = policy};
}

optim::OptimizerConfig RunConfig::optimizer_config() const {
  return {.name = optimizer,
          .adamw = {.beta1 = static_cast<float>(adam_beta1),
                    .beta2 = static_cast<float>(adam_beta2),
                    .eps = static_cast<float>(adam_eps),
                    .weight_decay = static_cast<float>(weight_decay)},
          .sgd = {.momentum = static_cast<float>(momentum)}};
}

parallel::Layout RunConfig::layout() const {
  parallel::Layout l = parallel::Layout::from_spec(mesh);
  l.microbatches = grad_accum;
  l.zero = zero;
  l.sequence_parallel = sequence_parallel;
  l.tp_overlap = tp_overlap;
  l.schedule = parallel::parse_schedule_kind(pp_schedule);
  l.virtual_stages = pp_virtual;
  return l;
}

parallel::LayoutChecks RunConfig::layout_checks() const {
  return {.model = model,
          .global_batch = batch,
          .pipeline_layers = pp_layers,
          .seq_len = sequence_length(),
          .context_load_balance = cp_load_balance,
          .int8_gradients = reduce_dtype == "int8"};
}

nn::ModelConfig model_config_from(const Attributes& a, const std::string& path) {
  nn::ModelConfig c;
  auto it = a.find("arch");
  if (it == a.end() || !std::holds_alternative<std::string>(it->second)) {
    throw UserError("checkpoint " + path + " has no model config; it was not written by shardlab train_gpt");
  }
  c.arch = nn::parse_arch(std::get<std::string>(it->second));
  c.vocab = get_int(a, "vocab", path);
  c.context = get_int(a, "context", path);
  c.d_model = get_int(a, "d_model", path);
  c.n_layers = get_int(a, "n_layers", path);
  c.n_heads = get_int(a, "n_heads", path);
  c.n_kv_heads = get_int(a, "n_kv_heads", path);
  c.d_ff = get_int(a, "d_ff", path);
  // Checkpoints from before these were stored hold the defaults.
  const auto real = [&](const char* key, float fallback) {
    const auto found = a.find(key);
    return found != a.end() && std::holds_alternative<double>(found->second) ? static_cast<float>(std::get<double>(found->second))
                                                                              : fallback;
  };
  c.rope_theta = real("rope_theta", c.rope_theta);
  c.norm_eps = real("norm_eps", c.norm_eps);
  const auto integer = [&](const char* key, int64_t fallback) {
    const auto found = a.find(key);
    return found != a.end() && std::holds_alternative<int64_t>(found->second) ? std::get<int64_t>(found->second) : fallback;
  };
  c.experts = integer("experts", c.experts);
  c.top_k = integer("top_k", c.top_k);
  c.moe_every = integer("moe_every", c.moe_every);
  c.capacity_factor = real("capacity_factor", c.capacity_factor);
  c.aux_loss_coef = real("aux_loss_coef", c.aux_loss_coef);
  c.z_loss_coef = real("z_loss_coef", c.z_loss_coef);
  c.validate();
  return c;
}

}  // namespace shardlab::runtime
