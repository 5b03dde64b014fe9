#include "examples/plan/gpu_conditions.h"

#include <cstdio>

#include "parallel/cost/training/gpu_conditions.h"

namespace shardlab::plan {
namespace {

using namespace shardlab::cost;

std::string verdict(bool ok) { return ok ? "ok" : "FAILS"; }
std::string n(int value) { return std::to_string(value); }
std::string fixed(double value, const char* format) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

std::string gpu_conditions_text(const TrainConfig& c, const StepEstimate& e, const HardwareProfile& hw) {
  const GpuConditions g = gpu_conditions(c, e, hw);
  std::string text = "  book conditions (gpus.md): " + human(g.tokens_per_gpu, "") + " tokens per GPU; alpha = C/W = " +
                     human(g.alpha_gpu, "") + " in a node (NVLink " + human(hw.ici.bandwidth, "B/s") + "), " +
                     human(g.alpha_node, "") + " past it (node egress " +
                     human(hw.node_size * hw.dcn.bandwidth, "B/s") + ")\n";
  if (g.batch > 1) {
    const std::string wires = wire_scaling(c.precision.wire, e.layout.fsdp * e.layout.context > 1);
    text += "    DP/FSDP X=" + n(g.batch) +
            (g.batch_inner > 1 ? " around " + n(g.batch_inner) + "-way model parallelism" : std::string()) +
            " over " + n(g.batch_nodes) + " node(s): W_collective " + human(g.batch_bandwidth, "B/s") + " on " + g.batch_path +
            ", " + human(g.tokens_per_gather, "") + " tokens per GPU" +
            (g.tokens_per_gather < g.tokens_per_gpu ? " and gather" : "") + " > C/W_collective" + wires + " = " +
            human(g.batch_critical, "") + ": " + verdict(g.tokens_per_gather > g.batch_critical) +
            (hw.sharp && !g.batch_sharp ? " (SHARP left out: " +
                                           std::string(e.layout.fsdp * e.layout.context > 1
                                                           ? "it reduces pure DP's AllReduce, not FSDP's gathers)"
                                                           : "the group is not whole nodes)")
                                     : "") +
            "\n";
    if (g.moe_batch_critical > 0)
      text += "    MoE experts (E/k = " + human(static_cast<double>(c.model.experts) / c.model.top_k, "") +
              "): > " + human(g.moe_batch_critical, "") + ": " +
              verdict(g.tokens_per_gather > g.moe_batch_critical) + "\n";
  }
  if (g.tensor > 1)
    text += "    TP Y=" + n(g.tensor) + (g.tensor <= hw.node_size ? " in one NVLink domain" : " across nodes") +
            ": W_collective " + human(g.tensor_bandwidth, "B/s") + ", Y < F W/C = " + human(g.tp_max_degree, "") +
            ": " + verdict(g.tensor < g.tp_max_degree) + "\n";
  if (g.expert > 1)
    text += "    EP Z=" + n(g.expert) + ", " + n(g.expert_per_node) + " per node: " +
            (g.expert > g.expert_per_node
                 ? "AllToAlls past the node T_comms/T_math = C (Z-l) min(l k/Z, 1)/(W_node k F) = " +
                       fixed(g.ep_ratio, "%.3g") + ": " + verdict(g.ep_ratio <= 1)
                 : std::string("within the NVLink domain: ok")) +
            "\n";
  if (g.pipe > 1) {
    text += "    PP " + n(g.pipe) + " stages, " + n(g.microbatches) + " microbatches: " +
            n(g.microbatches + g.pipe - 2) + " activation hops " + human(g.pp_seconds, "s") + " = " +
            fixed(g.pp_ratio, "%.3f") +
            " of the compute: " + verdict(g.pp_ratio <= 1) + "\n";
  }
  return text + book_verdict_line(g.comm_to_compute, e);
}

std::string book_verdict_line(double comm_to_compute, const StepEstimate& e) {
  const std::string book = "    T_comms/T_math by the book " + fixed(comm_to_compute, "%.2f") + ": " +
                           (comm_to_compute <= 1 ? "compute-bound" : "communication-bound") + "; the cost model's step ";
  if (e.cpu_step)  // --cluster local: as train_gpt predicts its own (cost/training/cpu_step.h)
    return book + human(e.step_seconds, "s") + " = compute " + human(e.compute_seconds, "s") +
           (e.bubble_fraction > 0 ? " with a " + human(100 * e.bubble_fraction, "") + "% pipeline bubble" : "") +
           " + the communication that does not hide " + human(e.step_seconds - e.compute_seconds, "s") + "\n";
  return book +
         human(e.step_seconds, "s") + " = max(compute " + human(e.compute_seconds, "s") +
         (e.bubble_fraction > 0 ? " with a " + human(100 * e.bubble_fraction, "") + "% pipeline bubble" : "") +
         ", communication " + human(e.comm_seconds - e.ring_exposed_seconds, "s") + ")" +
         (e.ring_exposed_seconds > 0 ? " + ring attention's exposed " + human(e.ring_exposed_seconds, "s") : "") + "\n";
}

Json gpu_conditions_json(const TrainConfig& c, const StepEstimate& e, const HardwareProfile& hw) {
  const GpuConditions g = gpu_conditions(c, e, hw);
  return Json{{"network", "switched"},
              {"node_size", g.node_size},
              {"tokens_per_gpu", g.tokens_per_gpu},
              {"alpha_gpu_tokens_per_gpu", g.alpha_gpu},
              {"alpha_node_tokens_per_gpu", g.alpha_node},
              {"batch_group", g.batch},
              {"batch_inner_model_parallel", g.batch_inner},
              {"batch_nodes", g.batch_nodes},
              {"batch_sharp", g.batch_sharp},
              {"batch_collective_bandwidth", g.batch_bandwidth},
              {"batch_path", g.batch_path},
              {"tokens_per_gpu_per_gather", g.tokens_per_gather},
              {"batch_critical_tokens_per_gpu", g.batch_critical},
              {"moe_batch_critical_tokens_per_gpu", g.moe_batch_critical},
              {"tensor", g.tensor},
              {"tensor_collective_bandwidth", g.tensor_bandwidth},
              {"tp_max_degree", g.tp_max_degree},
              {"expert", g.expert},
              {"expert_per_node", g.expert_per_node},
              {"ep_comm_to_compute_ratio", g.ep_ratio},
              {"pipe", g.pipe},
              {"microbatches", g.microbatches},
              {"pp_seconds", g.pp_seconds},
              {"pp_comm_to_compute_ratio", g.pp_ratio},
              {"comm_to_compute_ratio", g.comm_to_compute},
              {"compute_bound_by_book", g.compute_bound_by_book}};
}

}  // namespace shardlab::plan
