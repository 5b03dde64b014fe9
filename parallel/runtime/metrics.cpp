#include "parallel/runtime/metrics.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "framework/error.h"
#include "parallel/cost/model/transformer.h"

namespace shardlab::runtime {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double train_flops_per_token(const nn::ModelConfig& c, int64_t seq_len) {
  cost::TransformerShape s = cost::shape_of(c);
  s.context = seq_len;
  s.bias = false;  // the MFU convention's N: weight matrices only (the planner counts GPT's biases)
  return cost::train_flops_per_token(s, nn::Remat::None);
}

namespace {

// The step of a metrics row, -1 for a line without one (cut short by a killed run).
int64_t step_of(const std::string& row) {
  const std::string key = "\"step\": ";
  const size_t at = row.find(key);
  if (at == std::string::npos || !std::isdigit(static_cast<unsigned char>(row[at + key.size()]))) return -1;
  return std::atoll(row.c_str() + at + key.size());
}

// The rows of the JSONL file at `path`, split into runs: within a run the steps rise, so a
// row whose step is not above the one before starts the next run (a fresh run appended).
std::vector<std::vector<std::string>> runs_in(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> runs;
  std::string line;
  int64_t last = 0;
  while (std::getline(in, line)) {
    const int64_t step = step_of(line);
    if (step < 0) continue;
    if (runs.empty() || step <= last) runs.emplace_back();
    runs.back().push_back(line);
    last = step;
  }
  return runs;
}

// Rewrites `path` without the last run's rows past `last_step` (written by a run that was
// interrupted after its checkpoint); the earlier runs' rows stay. Atomic: temp file, rename.
void drop_rows_after(const std::string& path, int64_t last_step) {
  std::vector<std::vector<std::string>> runs = runs_in(path);
  if (runs.empty()) return;
  std::erase_if(runs.back(), [&](const std::string& row) { return step_of(row) > last_step; });
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& run : runs) {
      for (const std::string& row : run) out << row << "\n";
    }
    if (!out) throw UserError("cannot write metrics file " + tmp + "; choose another --metrics path");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, int64_t resumed_at) : path_(path) {
  if (path.empty()) return;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  if (resumed_at > 0) {
    drop_rows_after(path, resumed_at);
  } else if (const size_t earlier = runs_in(path).size(); earlier > 0) {
    std::printf("metrics %s: holds %zu earlier run%s; this run's rows follow them (launch/plot_loss.py plots each "
                "run)\n", path.c_str(), earlier, earlier == 1 ? "" : "s");
  }
  file_ = std::fopen(path.c_str(), "a");  // never truncated: a fresh run appends
  if (!file_) throw UserError("cannot open metrics file " + path + " for writing; choose another --metrics path");
  // A run killed mid-row left a line without its newline: end it, so this run's first
  // row starts a line of its own (runs_in passes over the broken one).
  std::ifstream last(path, std::ios::ate | std::ios::binary);
  if (last && last.tellg() > 0) {
    last.seekg(-1, std::ios::end);
    if (last.get() != '\n') std::fputc('\n', file_);
  }
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::flush_row() {
  if (!file_ || row_.empty()) return row_.clear();
  // One JSON object per line, `"key": value` pairs in key order; a non-finite
  // value (a diverged loss) is null.
  std::string line = "{";
  for (const auto& [key, value] : row_) {
    if (line.size() > 1) line += ", ";
    const bool whole = std::isfinite(value) && value == std::round(value) && std::abs(value) < 9e15;  // a step, a count
    const nlohmann::json v = whole ? nlohmann::json(static_cast<int64_t>(value)) : nlohmann::json(value);
    line += nlohmann::json(key).dump() + ": " + (std::isfinite(value) ? v.dump() : "null");
  }
  line += "}\n";
  const auto at = row_.find("step");
  const long long step = at != row_.end() ? static_cast<long long>(at->second) : -1;
  row_.clear();
  if ((std::fputs(line.c_str(), file_) >= 0 && std::fflush(file_) == 0) || warned_) return;
  // A log, not the run's state: losing rows must not end a long run whose checkpoints (on
  // the same disk, they fail and stop it with their own error) still resume it.
  warned_ = true;
  std::fprintf(stderr, "warning: cannot write metrics file %s at step %lld: %s; training goes on, its rows from here "
               "on may be missing (the progress lines still show the loss)\n", path_.c_str(), step,
               std::strerror(errno));
  std::fflush(stderr);
}

std::string format_duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

}  // namespace shardlab::runtime
