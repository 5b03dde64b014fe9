#include "examples/plan/train.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "examples/plan/args.h"
#include "examples/plan/command.h"
#include "examples/plan/gpu_conditions.h"
#include "examples/plan/layout_probe.h"
#include "framework/error.h"
#include "framework/precision.h"
#include "parallel/cost/network/multipod.h"
#include "parallel/cost/training/axis_conditions.h"
#include "parallel/cost/training/cpu_step.h"
#include "parallel/cost/training/planner.h"
#include "parallel/cost/training/run_totals.h"
#include "parallel/cost/training/tpu_conditions.h"
#include "parallel/spec/mesh_spec.h"

namespace shardlab::plan {
namespace {

using namespace shardlab::cost;

Json estimate_json(const StepEstimate& e) {
  Json comms = Json::array();
  for (const AxisComm& c : e.comms)
    comms.push_back(Json{{"axis", c.axis}, {"what", c.what}, {"op", to_string(c.op)}, {"bytes", c.bytes},
                         {"count", c.count}, {"seconds", c.seconds}, {"path", c.path},
                         {"hidden_seconds", c.hidden}});
  const Layout& l = e.layout;
  const Json layout{{"data", l.data},     {"fsdp", l.fsdp},     {"context", l.context},          {"pipe", l.pipe},
                    {"expert", l.expert}, {"tensor", l.tensor}, {"microbatches", l.microbatches},
                    {"zero", l.zero},     {"sequence_parallel", l.sequence_parallel},
                    {"schedule", parallel::to_string(l.schedule)}, {"virtual_stages", l.virtual_stages}};
  return Json{{"layout", layout},
              {"strategy", strategy_name(l)},
              {"step_seconds", e.step_seconds},
              {"step_seconds_serial", e.step_seconds_serial},
              {"compute_seconds", e.compute_seconds},
              {"tokens_per_chip", e.tokens_per_chip},
              {"padding_fraction", e.padding_fraction},
              {"comm_seconds", e.comm_seconds},
              {"ring_exposed_seconds", e.ring_exposed_seconds},
              {"bubble_fraction", e.bubble_fraction},
              {"compute_bound", e.compute_bound},
              {"bottleneck", e.bottleneck},
              {"memory_per_chip", memory_json(e.memory)},
              {"fits", e.fits},
              {"comms", comms}};
}

Json wire_json(const WireDtypes& w) {
  return Json{{"reduce_dtype", to_string(w.reduce)}, {"gather_dtype", to_string(w.gather)}};
}

// A communication-bound layout priced with narrower wires (planner.h's wire_advice), or null.
Json advice_json(const std::optional<WireAdvice>& advice) {
  if (!advice) return nullptr;
  Json j = wire_json(advice->wire);
  j.update(Json{{"flags", advice->flags},
                {"step_seconds", advice->estimate.step_seconds},
                {"comm_seconds", advice->estimate.comm_seconds},
                {"compute_bound", advice->estimate.compute_bound},
                {"reason", advice->reason}});
  return j;
}

// "  wires: gradient reductions fp32, parameter gathers fp32 (--reduce-dtype, --gather-dtype)"
std::string wires_line(const WireDtypes& w) {
  return "wires: gradient reductions " + to_string(w.reduce) + ", parameter gathers " + to_string(w.gather) +
         " (--reduce-dtype, --gather-dtype)\n";
}

// The book's conditions of one layout over all its axes at once: the TPU chapters' (ICI tori
// and DCN, parallel/cost/training/tpu_conditions.h), or on a switched GPU network the GPU chapter's
// (parallel/cost/training/gpu_conditions.h, examples/plan/gpu_conditions.h).
Json conditions_json(const TrainConfig& c, const StepEstimate& e, const HardwareProfile& hw) {
  if (hw.interconnect == Interconnect::kSwitched) return gpu_conditions_json(c, e, hw);
  const LayoutConditions k = layout_conditions(c, e, hw);
  return Json{{"pods", k.pods},
              {"chips_per_pod", k.chips_per_domain},
              {"tokens_per_chip", k.tokens_per_chip},
              {"tokens_per_pod", k.tokens_per_pod},
              {"alpha_tokens_per_chip", k.alpha},
              {"data_in_pod", k.data},
              {"data_torus_axes", k.data_axes},
              {"fsdp_in_pod", k.fsdp},
              {"fsdp_torus_axes", k.fsdp_axes},
              {"tensor_in_pod", k.tensor},
              {"tensor_torus_axes", k.tensor_axes},
              {"tokens_per_data_replica", k.tokens_per_data_replica},
              {"dp_critical_tokens_per_replica", k.dp_critical},
              {"tokens_per_fsdp_member", k.tokens_per_fsdp_member},
              {"fsdp_critical_tokens_per_member", k.fsdp_critical},
              {"tp_max_degree", k.tp_max_degree},
              {"fsdp_tp_critical_tokens_per_chip", k.fsdp_tp_critical},
              {"fsdp_x_opt", k.x_opt},
              {"context", k.context},
              {"ring_tokens_per_shard", k.ring_tokens_per_shard},
              {"ring_critical_tokens_per_shard", k.ring_critical},
              {"comm_to_compute_ratio", k.comm_to_compute},
              {"compute_bound_by_book", k.compute_bound_by_book},
              {"dcn_ways", k.dcn_ways},
              {"dcn_critical_tokens_per_pod", k.dcn_critical_per_pod},
              {"dcn_hidden", k.dcn_hidden},
              {"dcn_crossing_seconds", k.dcn_crossing_seconds},
              {"backward_seconds", k.backward_seconds},
              {"dcn_crossing_hidden", k.dcn_crossing_hidden}};
}

std::string conditions_text(const TrainConfig& c, const StepEstimate& e, const HardwareProfile& hw) {
  if (hw.interconnect == Interconnect::kSwitched) return gpu_conditions_text(c, e, hw);
  const LayoutConditions k = layout_conditions(c, e, hw);
  auto verdict = [](bool ok) { return std::string(ok ? "ok" : "FAILS"); };
  std::string text = "  book conditions (training.md), all axes at once: " + human(k.tokens_per_chip, "") +
                     " tokens per chip in " + (k.dcn_ways > 1 ? "each pod's " : "") +
                     std::to_string(k.chips_per_domain) + " chips, alpha = C/W_ici = " + human(k.alpha, "") + "\n";
  if (k.data > 1)
    text += "    DP data=" + std::to_string(k.data) + " over M_D=" + std::to_string(k.data_axes) + " axes: " +
            human(k.tokens_per_data_replica, "") + " tokens per replica > alpha/M_D" + wire_scaling(c.precision.wire, false) + " = " +
            human(k.dp_critical, "") + ": " + verdict(k.tokens_per_data_replica > k.dp_critical) + "\n";
  if (k.fsdp > 1)
    text += "    FSDP X=" + std::to_string(k.fsdp) + " over M_X=" + std::to_string(k.fsdp_axes) + " axes: " +
            human(k.tokens_per_fsdp_member, "") + " tokens per member and gather > alpha/M_X" + wire_scaling(c.precision.wire, true) + " = " +
            human(k.fsdp_critical, "") + ": " + verdict(k.tokens_per_fsdp_member > k.fsdp_critical) + "\n";
  if (k.tensor > 1)
    text += "    TP Y=" + std::to_string(k.tensor) + " over M_Y=" + std::to_string(k.tensor_axes) +
            " axes: Y < M_Y F/alpha = " + human(k.tp_max_degree, "") + ": " +
            verdict(k.tensor < k.tp_max_degree) + "\n";
  if (k.fsdp > 1 && k.tensor > 1)
    text += "    FSDP+TP: B/N > alpha^2/(M_X M_Y F) = " + human(k.fsdp_tp_critical, "") + ": " +
            verdict(k.tokens_per_chip > k.fsdp_tp_critical) + "; X_opt = sqrt(B N M_X/(F M_Y)) = " +
            human(k.x_opt, "") + " (this layout X=" + std::to_string(k.fsdp) + ")\n";
  if (k.ring_tokens_per_shard > 0)
    text += "    ring attention over context=" + std::to_string(k.context) + ": Tq = T/c = " +
            human(k.ring_tokens_per_shard, "") + " positions per chip > C K bytes/(2 N W v) = " +
            human(k.ring_critical, "") + " (a step's block attention hides its K/V): " +
            verdict(k.ring_tokens_per_shard > k.ring_critical) + "\n";
  if (k.dcn_ways > 1)
    text += "    DCN: " + std::to_string(k.dcn_ways) + " ways across " + std::to_string(k.pods) + " pods, " +
            human(k.tokens_per_pod, "") + " tokens per pod > C/W_dcn = " + human(k.dcn_critical_per_pod, "") + ": " +
            verdict(k.dcn_hidden) + "; collectives crossing pods " + human(k.dcn_crossing_seconds, "s") +
            " (ICI part included) vs backward " + human(k.backward_seconds, "s") + ": " +
            (k.dcn_crossing_hidden ? "hidden" : "NOT hidden") + "\n";
  return text + book_verdict_line(k.comm_to_compute, e);
}

// "data=2,fsdp=4,context=2,tensor=2[,microbatches=4]", in any order (the mesh parser,
// parallel/spec/mesh_spec.h); the axes must multiply to `chips`.
Layout parse_layout(const std::string& text, int chips) {
  Layout l;
  for (const parallel::AxisSpec& item : parallel::parse_axis_sizes(text, {}, "data=2,tensor=2,microbatches=4")) {
    const std::string& key = item.name;
    int* field = key == "microbatches" ? &l.microbatches : l.degree(key);
    if (!field)
      throw UserError("--layout " + text + " names '" + key +
                      "'; give sizes of data, fsdp, context, pipe, expert, tensor and microbatches");
    *field = item.size;
  }
  if (l.num_ranks() != chips)
    throw UserError("--layout " + text + " multiplies to " + std::to_string(l.num_ranks()) + " chips but --chips is " +
                    std::to_string(chips) + "; make the axis sizes multiply to the chip count");
  return l;
}

// --tokens: a whole run at this layout's step time (steps, seconds, days), JSON and a line.
std::optional<std::pair<Json, std::string>> run_of(const cxxopts::ParseResult& a, const StepEstimate& e,
                                                   double batch_tokens) {
  if (!a.count("tokens")) return std::nullopt;
  const double tokens = parse_size(a["tokens"].as<std::string>(), "tokens");
  if (!(tokens > 0)) throw UserError("--tokens must be a positive token count, e.g. 15e12");
  const double steps = tokens / batch_tokens, seconds = steps * e.step_seconds;
  return std::pair{Json{{"tokens", tokens}, {"steps", steps}, {"seconds", seconds},
                        {"days", seconds / kSecondsPerDay}},
                   "  run of " + scientific(tokens, "tokens") + ": " + human(steps, "") + " steps x " +
                       human(e.step_seconds, "s") + " = " + human(seconds / kSecondsPerDay, "") + " days\n"};
}

// " DOES NOT FIT in 80 GB of HBM (params ..., activations ...)": why a priced layout does
// not fit, after its memory per chip.
std::string does_not_fit(const StepEstimate& e, const HardwareProfile& hw) {
  const TrainingMemory& m = e.memory;
  return " DOES NOT FIT in " + human(hw.hbm_bytes, "B") + " of HBM (params " +
         human(m.params, "B") + ", grads " + human(m.grads, "B") + ", optimizer " + human(m.optimizer, "B") +
         ", activations " + human(m.activations, "B") + ")";
}

// --command prints the layout's train_gpt command after the answer; --run prints it, then
// runs it and returns its exit status.
int command_or_run(const cxxopts::ParseResult& a, Json json, std::string text, const std::string& command) {
  text += (a.count("layout") ? "as a command:\n  " : "best that fits, as a command:\n  ") + command + "\n";
  json["command"] = command;
  if (!a.count("run")) {
    emit(a, json, text);
    return 0;
  }
  emit(a, Json{{"command", command}}, text);
  std::cout.flush();
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// How far the book's per-chip bounds let this batch and these chips scale (training.md,
// "Data Parallelism" and "Scaling Across Pods"; gpus.md): DP/FSDP over every torus axis
// (or, on GPUs, across nodes; E/k times that for an MoE's experts), the most chips the
// batch keeps compute-bound and the least
// batch the chips need; on a torus the same for FSDP+TP with the book's M_X = axes - 1,
// M_Y = 1 and its X_opt split; TP's usable degree; and the sequences data parallelism can
// split without a context axis.
std::string scale_text(const TrainConfig& c, int chips, const HardwareProfile& hw, Json& json) {
  const bool gpu = hw.interconnect == Interconnect::kSwitched;
  const int axes = gpu ? 1 : std::max(1, hw.torus_axes);
  const BatchScale dp = batch_scale(
      moe_critical_batch(
          dp_critical_batch(hw, axes, gpu && chips > hw.node_size, c.precision.compute, c.precision.wire.reduce),
          c.model.experts, c.model.top_k),
      c.batch_tokens, chips);
  const double tp_max = tp_max_degree(c.model.d_ff, hw, 1, c.precision.compute);
  const double sequences = c.batch_tokens / static_cast<double>(c.model.context);
  json.update(Json{{"batch_sequences", sequences},
                   {"dp_scale", Json{{"critical_tokens_per_chip", dp.critical_per_chip}, {"axes", axes},
                                     {"max_chips", dp.max_chips}, {"min_batch_tokens", dp.min_batch_tokens}}},
                   {"tp_degree", tp_degree(tp_max, hw.node_size)}});
  std::string text = "scale: DP/FSDP " + (gpu ? std::string(chips > hw.node_size ? "across nodes" : "in a node")
                                              : "over all " + std::to_string(axes) + " torus axes") +
                     " needs > " + human(dp.critical_per_chip, "") + " tokens per chip" +
                     (c.model.experts > 0 ? " (x E/k for the experts)" : "") + ": this batch keeps at most " +
                     human(dp.max_chips, "") + " chips compute-bound, and " + std::to_string(chips) +
                     " chips need a batch of >= " + human(dp.min_batch_tokens, "tokens") + "\n";
  if (!gpu) {
    const double fsdp_axes = std::max(1, hw.torus_axes - 1);
    const BatchScale mixed = batch_scale(fsdp_tp_critical_batch(c.model.d_ff, hw, fsdp_axes, 1, c.precision.compute),
                                         c.batch_tokens, chips);
    const int pods = pods_spanned(chips, hw), domain = pods > 1 ? hw.node_size : chips;
    const FsdpTpSplit split = optimal_fsdp_tp_split(c.batch_tokens * domain / chips, c.model.d_ff, domain, fsdp_axes, 1);
    json.update(Json{{"fsdp_tp_scale", Json{{"critical_tokens_per_chip", mixed.critical_per_chip},
                                            {"fsdp_axes", fsdp_axes}, {"tensor_axes", 1},
                                            {"max_chips", mixed.max_chips}, {"min_batch_tokens", mixed.min_batch_tokens}}},
                     {"fsdp_tp_split", Json{{"x_opt", split.x_opt}, {"fsdp", split.fsdp}, {"tensor", split.tensor},
                                            {"whole_fsdp", split.whole_fsdp}, {"whole_tensor", split.whole_tensor}}}});
    text += "  FSDP+TP (M_X=" + human(fsdp_axes, "") + ", M_Y=1) needs > alpha^2/(M_X M_Y F) = " +
            human(mixed.critical_per_chip, "") + " per chip: at most " + human(mixed.max_chips, "") +
            " chips, >= " + human(mixed.min_batch_tokens, "tokens") + " on " + std::to_string(chips) +
            "; X_opt = sqrt(B N M_X/(F M_Y)) = " + human(split.x_opt, "") + (pods > 1 ? " per pod" : "") +
            ": fsdp=" + std::to_string(split.fsdp) + " x tensor=" + std::to_string(split.tensor) +
            " in powers of two, fsdp=" + std::to_string(split.whole_fsdp) + " x tensor=" +
            std::to_string(split.whole_tensor) + " on all " + std::to_string(domain) + " chips\n";
  }
  text += "  TP below " + human(tp_max, "") + "-way per axis: " + std::to_string(tp_degree(tp_max, hw.node_size)) +
          "-way (a power of two" + (gpu ? ", not straddling nodes" : "") + "); " + human(sequences, "") +
          " sequences of " + std::to_string(c.model.context) +
          " tokens: data x fsdp x expert at most that without a context axis\n";
  return text;
}

}  // namespace

int cmd_train(const cxxopts::ParseResult& a) {
  // --cluster local: this machine, as measured (shardlab-plan calibrate), in train_gpt's default precision.
  const std::string cluster = a.count("cluster") ? a["cluster"].as<std::string>() : "";
  if (!cluster.empty() && cluster != "local") {
    throw UserError("--cluster '" + cluster + "' is not known; 'local' (this machine's measured profile) is, or give --hw");
  }
  // Each layout's ranks get the threads launch/run.sh gives them (cores / ranks, at least 1)
  // unless --threads says, and the profile's figures for that count where it holds them.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = a["threads"].as<int>() > 0 ? a["threads"].as<int>() : std::max(1, cores / std::max(1, a["chips"].as<int>()));
  if (a["threads"].as<int>() < 0) throw UserError("--threads must be 0 (cores / chips) or a count, got " + std::to_string(a["threads"].as<int>()));
  HardwareProfile hw = hardware_from(a, cluster.empty() ? "" : "local", cluster.empty() ? 0 : threads);
  if (a.count("params") && (!a["model"].as<std::string>().empty() || a.count("layers")))
    throw UserError("give --params " + a["params"].as<std::string>() +
                    " with --d-model (the layer count follows), or the shape (--model or --layers ...) without it");
  TrainConfig c;
  c.model = model_from(a);
  // A shape derived from --params: say which (the ranking's first line is the shape).
  const std::string derived = a.count("params") ? c.model.describe() + " (L from --params)\n" : "";
  c.batch_tokens = train_batch_tokens(a, c.model);
  c.remat = nn::parse_remat(a["remat"].as<std::string>());
  // --cluster local trains as train_gpt would here: its --precision auto (bf16 where this
  // CPU's bf16 kernels measure faster, framework/precision.h), unless --precision says.
  const std::string precision = cluster == "local" && !a.count("precision") ? dtype_name(default_precision().compute)
                                                                             : a["precision"].as<std::string>();
  if (precision == "fp32") c.precision = fp32_training();
  else if (precision != "bf16") throw UserError("--precision must be bf16 or fp32, got '" + precision + "'");
  // The wires default to the precision's, as train_gpt's do.
  if (a.count("reduce-dtype")) c.precision.wire.reduce = cost::parse_wire_dtype(a["reduce-dtype"].as<std::string>(), "--reduce-dtype");
  if (a.count("gather-dtype")) c.precision.wire.gather = cost::parse_wire_dtype(a["gather-dtype"].as<std::string>(), "--gather-dtype");
  c.efficiency = efficiency_from(a);
  c.shardlab_activations = cluster == "local";  // what train_gpt's autograd will keep
  // Its bf16 matmuls keep bf16 operands on oneDNN's bf16 kernels, fp32 copies on the
  // rounded path (SHARDLAB_BF16_MATMUL forces a path for both programs).
  if (c.shardlab_activations && precision == "bf16") {
    c.matmul_copy_bytes = expected_bf16_matmul("auto") == Bf16Matmul::kNative ? 2.0 : 4.0;
  }
  c.context_comm = parallel::parse_context_comm(a["cp-comm"].as<std::string>());
  const int chips = chips_or_pods(a, hw, a["chips"].as<int>());
  // --cluster local prices a step as train_gpt predicts its own (TrainConfig::cpu_step): a
  // chip is one rank with the profile's threads, and ranks beyond the cores share them.
  if (cluster == "local") {
    c.cpu_step = true;
    c.core_sharing = core_sharing(chips, std::max(1, fingerprint_threads(hw.fingerprint)));
    c.capacity_factor = nn::ModelConfig{}.capacity_factor;  // train_gpt's default
  }
  // --probe: compute as the run's start-up probe measures it (layout_probe.h); shared by
  // every layout the ranking prices, each rank shape timed once.
  std::shared_ptr<LayoutProbe> probe;
  if (a.count("probe")) {
    if (cluster != "local") throw UserError("--probe times layouts on this machine: add --cluster local");
    probe = std::make_shared<LayoutProbe>(c, threads, precision == "bf16");
    c.measured_compute = [probe](const Layout& l) { return probe->compute_seconds(l); };
  }
  auto note_probe = [&probe](Json& json, std::string& text) {
    json["probe"] = probe ? probe->summary() : "";
    if (probe) text += "compute measured here (--probe): " + probe->summary() + "\n";
  };
  hw.sharp = a.count("sharp") > 0;  // every all_reduce over whole switches, in the conditions and in the step
  if (hw.sharp && hw.interconnect != Interconnect::kSwitched)
    throw UserError("--sharp: " + hw.name + " is a TPU torus; SHARP is in-network reduction in NVIDIA switches, so give a "
                    "GPU profile (h100, b200, ...) or drop --sharp");
  if (a.count("layout")) {
    Layout l = parse_layout(a["layout"].as<std::string>(), chips);
    l.zero = a["zero"].as<int>();
    l.sequence_parallel = a.count("sequence-parallel") > 0;
    l.schedule = parallel::parse_schedule_kind(a["pp-schedule"].as<std::string>());
    l.virtual_stages = a["pp-virtual"].as<int>();
    const StepEstimate e = estimate_train_step(c, l, hw);
    std::string text = derived + strategy_name(l) + " " + layout_summary(l) + ": step " + human(e.step_seconds, "s") + " (compute " +
                       human(e.compute_seconds, "s") + ", communication " + human(e.comm_seconds, "s") + ", " +
                       (e.compute_bound ? "compute-bound" : "bound by " + e.bottleneck) + "), " +
                       human(e.tokens_per_chip, "") + " tokens/chip" +
                       (e.padding_fraction > 0 ? " (" + scientific(100 * e.padding_fraction, "% padding)") : "") +
                       ", memory/chip " + human(e.memory.total(), "B") + (e.fits ? "" : does_not_fit(e, hw)) + "\n";
    for (const AxisComm& comm : e.comms)
      text += "  " + comm.axis + ": " + std::to_string(comm.count) + " x " + comm.what + " of " +
              human(comm.bytes, "B") + " = " + human(comm.seconds, "s") + " over " + comm.path +
              (comm.stalls ? ", " + human(comm.seconds - comm.hidden, "s") + " of it exposed (not under the block attention)"
                           : std::string()) +
              "\n";
    text += "  " + wires_line(c.precision.wire);
    const std::optional<WireAdvice> advice = wire_advice(c, e, hw);
    if (advice) text += "  communication-bound on " + e.bottleneck + ": " + advice->reason + "\n";
    text += conditions_text(c, e, hw);
    Json json = estimate_json(e);
    json["wire"] = wire_json(c.precision.wire);
    json["compression"] = advice_json(advice);
    json["book_conditions"] = conditions_json(c, e, hw);
    note_probe(json, text);
    Json scale = Json::object();
    text += scale_text(c, chips, hw, scale);
    json["scale"] = scale;
    if (const auto run = run_of(a, e, c.batch_tokens)) {
      json["run"] = run->first;
      text += run->second;
    }
    if (a.count("command") || a.count("run")) {
      if (!e.fits) throw UserError("--layout " + layout_summary(l) + ": memory/chip " + human(e.memory.total(), "B") + does_not_fit(e, hw) +
                                   "; nothing to run: choose a layout that fits");
      return command_or_run(a, json, text, train_command(c, l, a["train-args"].as<std::string>()));
    }
    emit(a, json, text);
    return 0;  // the price of the one layout asked for is the answer, whether it fits or not
  }
  if (probe) {  // every layout the ranking prices, its shapes timed together (layout_probe.h)
    std::vector<Layout> layouts;
    TrainConfig collect = c;
    collect.measured_compute = [&layouts](const Layout& l) {
      layouts.push_back(l);
      return 1.0;
    };
    plan_training(collect, chips, hw);
    layouts.push_back(Layout{});  // one process, timed in the same rounds: the speed-ups' reference
    probe->time_shapes(layouts);
  }
  const Plan plan = plan_training(c, chips, hw);
  // With --probe, one process's step (its probed compute on its own core): each layout's
  // speed-up over it, measured in the same rounds, so that the machine's drift cancels.
  const double one_process = probe ? estimate_train_step(c, Layout{}, hw).step_seconds : 0.0;
  require_positive("--top", a["top"].as<int>());
  const int top = std::min<int>(a["top"].as<int>(), static_cast<int>(plan.ranked.size()));
  const int64_t ff = c.model.d_ff;
  const double per_chip = c.batch_tokens / chips;
  Json conditions = Json{{"tokens_per_chip", per_chip},
                         {"dp_critical_batch", dp_critical_batch(hw, 1, false, c.precision.compute, c.precision.wire.reduce)},
                         {"tp_max_degree", tp_max_degree(ff, hw, 1, c.precision.compute)},
                         {"fsdp_tp_critical_batch", fsdp_tp_critical_batch(ff, hw, 1, 1, c.precision.compute)}};
  const double dense_critical = dp_critical_batch(hw, 1, false, c.precision.compute, c.precision.wire.reduce);
  if (c.model.experts > 0) {
    conditions.update(Json{{"moe_critical_batch", moe_critical_batch(dense_critical, c.model.experts, c.model.top_k)}});
  }
  // X_opt within one ICI domain: the whole slice, or one pod's share of the batch past a pod.
  const int pods = pods_spanned(chips, hw);
  const int domain = pods > 1 ? hw.node_size : chips;
  const FsdpTpSplit split = optimal_fsdp_tp_split(c.batch_tokens * domain / chips, ff, domain, 1, 1);
  conditions.update(Json{{"fsdp_tp_x_opt", split.x_opt}});
  const double dcn_critical = dcn_critical_batch_per_pod(hw, c.precision.compute);
  std::string pods_text;
  if (pods > 1) {
    conditions.update(Json{{"pods", pods},
                           {"tokens_per_pod", c.batch_tokens / pods},
                           {"dcn_critical_tokens_per_pod", dcn_critical}});
    pods_text = pods_line(hw, pods, c.batch_tokens, c.precision.compute) + "\n";
  }
  Json ranked = Json::array(), skipped = Json::object();
  std::string text = (derived.empty() ? c.model.describe() + "\n" : derived) + human(c.batch_tokens, "tokens") + " per step on " +
                     std::to_string(chips) + " x " + hw.name + ": " + human(per_chip, "") +
                     " tokens per chip; DP/FSDP compute-bound above " +
                     human(dp_critical_batch(hw, 1, false, c.precision.compute, c.precision.wire.reduce), "") + " per chip and axis, TP below " +
                     human(tp_max_degree(ff, hw, 1, c.precision.compute), "") + "-way per axis; FSDP+TP X_opt " +
                     human(split.x_opt, "") + (pods > 1 ? " per pod" : "") +
                     (c.model.experts > 0
                          ? "; MoE layers (each expert sees k/E of the tokens) need E/k = " +
                                human(static_cast<double>(c.model.experts) / c.model.top_k, "") + " times: above " +
                                human(moe_critical_batch(dense_critical, c.model.experts, c.model.top_k), "") +
                                " per chip"
                          : std::string()) +
                     "\n" + pods_text +
                     std::to_string(plan.ranked.size()) + " layouts, " +
                     std::to_string(plan.feasible) + " fit in " + human(hw.hbm_bytes, "B") + "\n";
  for (int i = 0; i < top; ++i) {
    const PlanEntry& e = plan.ranked[i];
    Json entry = estimate_json(e.estimate);
    entry.update(Json{{"rank", i + 1},
                      {"summary", layout_summary(e.estimate.layout)},
                      {"verdict", e.verdict},
                      {"compression", advice_json(e.compression)},
                      {"book_conditions", conditions_json(c, e.estimate, hw)}});
    if (probe) entry["speedup"] = one_process / e.estimate.step_seconds;  // over one process, timed alike
    // On this machine (--cluster local) every ranked layout can be launched as it is.
    if (c.cpu_step) entry["command"] = train_command(c, e.estimate.layout, "");
    ranked.push_back(entry);
    char line[512];
    std::snprintf(line, sizeof line, "%3d. %-10s %-40s step %-9s mem/chip %-9s %s\n", i + 1,
                  strategy_name(e.estimate.layout).c_str(), layout_summary(e.estimate.layout).c_str(),
                  human(e.estimate.step_seconds, "s").c_str(), human(e.estimate.memory.total(), "B").c_str(),
                  e.verdict.c_str());
    text += line;
  }
  for (const auto& [why, count] : plan.skipped) {
    skipped[why] = count;
    text += "  skipped " + std::to_string(count) + ": " + why + "\n";
  }
  text += wires_line(c.precision.wire) + scale_text(c, chips, hw, conditions);
  // The best layout's conditions over all its axes, and a whole run at its step time.
  Json run_json;
  if (!plan.ranked.empty() && plan.ranked.front().estimate.fits) {
    const StepEstimate& best = plan.ranked.front().estimate;
    text += "best: " + layout_summary(best.layout) + "\n" + conditions_text(c, best, hw);
    if (const auto run = run_of(a, best, c.batch_tokens)) {
      run_json = run->first;
      text += run->second;
    }
  }
  Json json{{"hw", hw.name}, {"model", c.model.describe()}, {"chips", chips}, {"batch_tokens", c.batch_tokens},
            {"wire", wire_json(c.precision.wire)}, {"conditions", conditions}, {"layouts", static_cast<int>(plan.ranked.size())},
            {"feasible", plan.feasible}, {"ranked", ranked}, {"skipped", skipped}, {"run", run_json},
            {"one_process_step_seconds", one_process}};
  note_probe(json, text);
  if (probe && !plan.ranked.empty()) {
    char line[128];
    std::snprintf(line, sizeof line, "one process: step %s; the best layout %.2fx as fast\n", human(one_process, "s").c_str(),
                  one_process / plan.ranked.front().estimate.step_seconds);
    text += line;
  }
  // --command / --run: the best layout that fits, as a train_gpt command line.
  if (a.count("command") || a.count("run")) {
    const auto best = std::find_if(plan.ranked.begin(), plan.ranked.end(), [](const PlanEntry& e) { return e.estimate.fits; });
    if (best == plan.ranked.end()) throw UserError("no layout fits in " + human(hw.hbm_bytes, "B") + " per chip; nothing to run");
    return command_or_run(a, json, text, train_command(c, best->estimate.layout, a["train-args"].as<std::string>()));
  }
  json["command"] = "";
  emit(a, json, text);
  return plan.feasible > 0 ? 0 : 2;  // ranking: no layout fits, no answer
}

}  // namespace shardlab::plan
