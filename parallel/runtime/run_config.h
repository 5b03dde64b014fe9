// RunConfig: everything a training run is told, validated: the model, the data, the
// optimisation, the layout and what to log and save (torchtitan's JobConfig). train_gpt
// fills it from its flags (examples/train/run_flags.h); the runtime's pieces read it.
//
// validate() is pure, so every rank of a job validates the same config identically before
// the first collective.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "framework/checkpoint.h"
#include "framework/nn/config.h"
#include "optim/make_optimizer.h"
#include "parallel/layout.h"
#include "parallel/parallelize.h"

namespace shardlab::runtime {

struct RunConfig {
  nn::ModelConfig model;
  // data
  std::string data = "arithmetic";  // "arithmetic" or a path (or pattern) to text files / llm.c .bin shards
  std::string val_data;              // held-out files; "" for the last tenth of data
  std::string tokenizer;             // a tokenizer file that encodes text data; "": bytes are tokens
  bool shuffle = true;               // .bin shard data: shard and window order drawn per epoch from seed
  int digits = 2;
  // optimisation
  int64_t batch = 32;       // global batch, in sequences
  int64_t seq_len = 0;      // 0: the model context
  int64_t steps = 2000;
  int grad_accum = 1;       // microbatches per step
  std::string optimizer = "adamw";
  double lr = 1e-3, min_lr = 1e-4;
  int64_t warmup = 100;    // capped at --steps; -1: a tenth of the steps
  double weight_decay = 0.1, momentum = 0.9, grad_clip = 1.0;
  double adam_beta1 = 0.9, adam_beta2 = 0.95, adam_eps = 1e-8;
  uint64_t seed = 1234;
  // mixed precision (framework/precision.h, docs/mixed_precision.md)
  std::string precision = "fp32";     // compute dtype: fp32 or bf16; train_gpt's flag defaults to auto,
                                      // which resolve_precision (precision_choice.h) makes one of them
  std::string precision_reason;       // why auto became what it did ("" when the user chose)
  std::string reduce_dtype = "fp32";  // dtype gradients are reduced in: fp32, bf16 or int8
  std::string gather_dtype = "auto";  // ZeRO-3 parameter gathers: auto (the compute dtype), fp32, bf16, int8
  std::string activation_dtype = "auto";  // activations between model-parallel ranks: auto (the compute dtype), fp32, bf16
  std::string bf16_matmul = "auto";   // bf16 matmul kernels: auto (measured), native or rounded
  // evaluation, logging, checkpoints
  int64_t eval_every = 250, eval_batches = 4, eval_problems = 100;
  int64_t log_every = 50;
  std::string metrics = "runs/metrics.jsonl";  // JSONL, appended to; train_gpt: <ckpt_dir>/metrics.jsonl
  std::string ckpt_dir = "runs";
  int64_t ckpt_every = 0;   // 0: only at the end
  bool save_step0 = false;  // also a checkpoint of the initial weights
  bool ckpt_async = false;  // checkpoints written by a background thread (async_checkpoint.h)
  std::string dump_grads;   // file for the first step's gradients ('' none)
  std::string resume;       // a checkpoint path to continue from
  std::string init_from;    // weights to start from: a checkpoint or a Hugging Face directory (init_from.h)
  std::string on_nonfinite = "stop";  // a non-finite loss or gradient norm: stop, or skip the update
  int64_t max_skips = 3;              // --on-nonfinite skip: steps in a row before it stops
  int threads = 0;          // OpenMP threads per rank, 0: runtime default
  // parallel layout
  std::string mesh = "data=1";
  int zero = 0;
  double bucket_mb = 4.0;
  bool overlap = true;
  bool reshard_after_forward = true;
  bool sequence_parallel = false;
  bool tp_overlap = false;
  std::string cp_comm = "ring";    // context axis: ring or allgather attention
  bool cp_load_balance = true;     // context axis: head-tail chunks
  std::string pp_schedule = "1f1b";
  int pp_virtual = 1;
  std::vector<int64_t> pp_layers;  // blocks per pipeline stage, empty: balanced by cost
  std::string link_profile = "local", link_mode = "off";
  double link_scale = 1.0;
  double collective_timeout = 0;  // seconds a rank may wait in one collective; 0: automatic
  std::string trace;  // Chrome trace JSON of every collective, "" for none
  bool dry_run = false;  // plan and check one step's collectives, then exit
  // Measure the peak FLOP/s (for MFU) and time a stand-in of the layout (for the predicted
  // step) at start-up; off, a run starts sooner and prints neither.
  bool probe = true;

  bool help = false;
  std::string help_text;
  // The arguments after --config files are expanded (NUL-separated): what every rank must agree on.
  std::string flags;
  // Every setting as JSON (config_file.h's settings_json), saved in checkpoints as run_config.
  std::string settings;

  int64_t sequence_length() const { return seq_len > 0 ? seq_len : model.context; }
  int64_t warmup_steps() const { return warmup >= 0 ? std::min(warmup, steps) : steps / 10; }
  void validate() const;         // UserError naming the values and the fix
  Attributes to_attributes() const;  // what a checkpoint stores as its config
  parallel::DataParallelConfig data_parallel() const;
  // --optimizer and its options, for optim::make_optimizer over the strategy's parameters.
  optim::OptimizerConfig optimizer_config() const;
  // The precision's dtypes come from --precision and --reduce-dtype; the bf16 matmul path,
  // a property of the machine, from choose_precision (precision_choice.h).
  parallel::ParallelConfig parallel() const;
  // The watchdog's timeout: --collective-timeout when given; else 300 s until a step has
  // been timed (first_step_seconds 0), then 10x that step plus 30 s.
  double watchdog_timeout(double first_step_seconds) const;
  // The layout this run trains: --mesh, with --grad-accum, --zero, --sequence-parallel,
  // --tp-overlap, --pp-schedule and --pp-virtual (parallel/layout.h).
  parallel::Layout layout() const;
  // What the layout is validated against: the model, the batch and the sequences.
  parallel::LayoutChecks layout_checks() const;
};

// Rebuilds the model config a checkpoint was written with; UserError if it lacks one.
nn::ModelConfig model_config_from(const Attributes& attributes, const std::string& path);

}  // namespace shardlab::runtime
