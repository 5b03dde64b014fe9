#include "examples/plan/command.h"

#include <cmath>
#include <filesystem>
#include <system_error>
#include <vector>

#include "framework/error.h"
#include "parallel/spec/mesh_spec.h"

namespace shardlab::plan {

std::string train_command(const cost::TrainConfig& c, const cost::Layout& l, const std::string& extra) {
  const cost::TransformerShape& m = c.model;
  const double sequences = c.batch_tokens / static_cast<double>(m.context);
  if (sequences < 1 || sequences != std::floor(sequences)) {
    throw UserError("--batch " + std::to_string(static_cast<int64_t>(c.batch_tokens)) + " tokens is not a whole number of " +
                    std::to_string(m.context) + "-token sequences; train_gpt takes its batch in sequences");
  }
  std::vector<parallel::AxisSpec> mesh;
  for (const parallel::AxisSpec& axis : {parallel::AxisSpec{"data", l.data}, {"fsdp", l.fsdp}, {"pipe", l.pipe},
                                         {"expert", l.expert}, {"context", l.context}, {"tensor", l.tensor}}) {
    if (axis.size > 1) mesh.push_back(axis);
  }
  if (mesh.empty()) mesh.push_back({"data", 1});
  const auto flag = [](const char* name, int64_t value) { return std::string(" --") + name + " " + std::to_string(value); };
  std::string cmd = run_script_path() + " -n " + std::to_string(l.num_ranks()) + " -- " + train_gpt_path();
  cmd += std::string(" --arch ") + (m.gated_mlp ? "llama" : "gpt");
  cmd += flag("vocab", m.vocab) + flag("context", m.context) + flag("d-model", m.d_model) + flag("layers", m.layers) +
         flag("heads", m.heads);
  if (m.gated_mlp) cmd += flag("kv-heads", m.kv_heads);
  cmd += flag("d-ff", m.d_ff);
  if (m.experts > 0) cmd += flag("experts", m.experts) + flag("top-k", m.top_k) + flag("moe-every", m.moe_every);
  // The cost model's state shards over fsdp x context as ZeRO-3; train_gpt refuses --zero 3
  // beside a pipe axis (parallel/layout.cpp), where its fsdp axis shards all the same.
  cmd += " --mesh " + parallel::axis_sizes_string(mesh) + (l.fsdp * l.context > 1 && l.pipe == 1 ? " --zero 3" : "");
  if (l.fsdp * l.context == 1 && l.data > 1 && l.zero > 0) cmd += flag("zero", l.zero);
  if (l.tensor > 1 && l.sequence_parallel) cmd += " --sequence-parallel";
  if (l.pipe > 1 && l.schedule != parallel::ScheduleKind::k1F1B) {
    cmd += " --pp-schedule " + parallel::to_string(l.schedule);
    if (l.virtual_stages > 1) cmd += flag("pp-virtual", l.virtual_stages);
  }
  if (l.context > 1) cmd += std::string(" --cp-comm ") + parallel::context_comm_name(c.context_comm);
  // train_gpt's wires are fp32 unless told (as the planner's with fp32 training).
  if (c.precision.wire.reduce != cost::DType::kFp32) cmd += " --reduce-dtype " + cost::to_string(c.precision.wire.reduce);
  if (l.fsdp * l.context > 1 && c.precision.wire.gather != cost::DType::kFp32)
    cmd += " --gather-dtype " + cost::to_string(c.precision.wire.gather);
  cmd += flag("batch", static_cast<int64_t>(sequences)) + flag("grad-accum", l.microbatches);
  cmd += std::string(" --remat ") + nn::remat_name(c.remat);
  if (!extra.empty()) cmd += " " + extra;
  return cmd;
}

namespace {

// The directory of the running executable (<repo>/<build>/examples), or empty.
std::filesystem::path executable_dir() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : exe.parent_path();
}

// `path` when it exists, else `fallback`.
std::string existing_or(const std::filesystem::path& path, const char* fallback) {
  std::error_code error;
  return !path.empty() && std::filesystem::exists(path, error) ? path.string() : fallback;
}

}  // namespace

std::string train_gpt_path() {
  const std::filesystem::path dir = executable_dir();
  return existing_or(dir.empty() ? dir : dir / "train_gpt", "train_gpt");  // the same build
}

std::string run_script_path() {
  const std::filesystem::path dir = executable_dir();  // <repo>/<build>/examples -> <repo>/launch/run.sh
  return existing_or(dir.empty() ? dir : dir.parent_path().parent_path() / "launch" / "run.sh", "launch/run.sh");
}

}  // namespace shardlab::plan
