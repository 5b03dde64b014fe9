// What a run reports: the progress line on rank 0 and a JSONL file with one object per step.
//
// Every number is measured and labelled: tokens/s from wall-clock step time, MFU as model
// FLOPs (6N + attention, the convention of the PyTorch reference benchmark) divided by the
// FMA peak measured on this machine at start-up.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "framework/nn/config.h"

namespace shardlab::runtime {

// Model FLOPs per token of training at sequence length `seq_len`: the cost model's
// train_flops_per_token (parallel/cost/model/transformer.h) counting weight matrices only, no
// biases, and no remat recompute (not useful work): 6 * N_matmul + 12 * L * T * D, no
// causal discount.
double train_flops_per_token(const nn::ModelConfig& c, int64_t seq_len);

// The median of `v` (0 if empty): how a run and its prediction summarise repeated timings.
double median(std::vector<double> v);

class MetricsLog {
 public:
  // "" disables the file. An existing file is never truncated: a fresh run appends its rows
  // after the earlier runs' (within a run the steps rise, so a step not above the one
  // before starts a run). A run resumed at step `resumed_at` (> 0) continues the file's
  // last run: that run's rows of later steps, written after its checkpoint by the run that
  // was interrupted, go; earlier runs' rows stay.
  MetricsLog(const std::string& path, int64_t resumed_at);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  // Adds a field to the current row; flush_row() writes it as one JSON object per line,
  // {"step": 10, "loss": 2.31, ...}, and starts the next row. A row that cannot be written
  // (a full disk) prints one warning naming the file and the reason, and training goes on
  // (docs/reliability.md: the file is a log, the checkpoints hold the run).
  void add(const std::string& key, double value) { row_[key] = value; }
  void flush_row();

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  bool warned_ = false;  // a row failed to be written
  std::map<std::string, double> row_;
};

std::string format_duration(double seconds);  // "1m23s"

}  // namespace shardlab::runtime
