#include "examples/train/run_flags.h"

#include <cxxopts.hpp>
#include <filesystem>

#include "examples/train/config_file.h"
#include "framework/error.h"
#include "framework/text/tokenizer_files.h"

namespace shardlab::cli {

using runtime::RunConfig;

namespace {

// "3,5" -> {3, 5}; "" -> {}.
std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    size_t used = 0;
    try {
      out.push_back(std::stoll(item, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size()) {
      throw UserError(flag + " '" + text + "' is not a comma-separated list of integers, e.g. 3,5");
    }
    begin = end + 1;
  }
  return out;
}

}  // namespace

std::string command_line(int argc, const char* const* argv) {
  std::string line;
  for (int i = 1; i < argc; ++i) line.append(argv[i]).push_back('\0');
  return line;
}

RunConfig parse_run_config(int argc_given, const char* const* argv_given) {
  RunConfig r;
  // --config FILE stands for FILE's flags, in its place: later flags override it.
  const ExpandedArgs expanded = expand_config_flags(argc_given, argv_given);
  std::vector<const char*> args;
  for (const std::string& a : expanded.args) args.push_back(a.c_str());
  const int argc = static_cast<int>(args.size());
  const char* const* argv = args.data();
  r.flags = command_line(argc, argv);
  cxxopts::Options o("train_gpt", "Train a GPT-2 or LLaMA-style language model (default: arithmetic, no download).\n"
                     "Exit codes: 0 trained; 1 an error (bad input, a diverged run, a failed write), with a message; "
                     "143 preempted: SIGTERM, SIGINT or SIGUSR1 (on any rank, or on mpirun: SIGUSR1) saved a "
                     "checkpoint of the step in hand, resume with --resume latest (a second signal ends it at once).");
  o.add_options("model")
      ("model", "preset: gpt-arith, gpt-small, gpt-bench, gpt-tiny, llama-small, llama-tiny, gpt-moe-tiny, "
       "llama-moe-tiny, llama-moe-small", cxxopts::value<std::string>()->default_value("gpt-arith"))
      ("arch", "gpt or llama (overrides the preset)", cxxopts::value<std::string>())
      ("vocab", "vocabulary size V", cxxopts::value<int64_t>())
      ("context", "context length T", cxxopts::value<int64_t>())
      ("d-model", "model width D", cxxopts::value<int64_t>())
      ("layers", "number of blocks L", cxxopts::value<int64_t>())
      ("heads", "attention heads N", cxxopts::value<int64_t>())
      ("kv-heads", "key/value heads K (LLaMA GQA)", cxxopts::value<int64_t>())
      ("d-ff", "MLP hidden width F", cxxopts::value<int64_t>())
      ("rope-theta", "LLaMA: RoPE base (presets: 500000, LLaMA 3's)", cxxopts::value<double>())
      ("norm-eps", "epsilon of LayerNorm / RMSNorm", cxxopts::value<double>())
      ("experts", "mixture of experts: E experts per MoE block (0: a dense model)", cxxopts::value<int64_t>())
      ("top-k", "MoE: experts per token k (1: Switch; 2+: renormalised gates, as Mixtral)", cxxopts::value<int64_t>())
      ("moe-every", "MoE: every n-th block has experts (blocks n-1, 2n-1, ...)", cxxopts::value<int64_t>())
      ("capacity-factor",
       "MoE: slots per expert per sequence = ceil(C T k / E); 0: dropless (as many as the fullest expert needs)",
       cxxopts::value<double>())
      ("aux-loss-coef", "MoE: weight of the load-balancing loss", cxxopts::value<double>())
      ("z-loss-coef", "MoE: weight of the router z-loss", cxxopts::value<double>())
      ("remat", "rematerialisation per block: none, full (keep block inputs), save-matmul (also keep every "
       "Linear output) or save-mlp-matmul (also keep the MLP up-projections)",
       cxxopts::value<std::string>()->default_value("none"))
      ("fused-head", "the loss's head: on (chunked linear + cross-entropy, never holding the B T x V logits), off "
       "(linear, then cross-entropy) or auto (on where the logits would pass 64 MiB per rank)",
       cxxopts::value<std::string>()->default_value("auto"));
  o.add_options("data")
      ("data", "'arithmetic' (embedded) or a text file or llm.c .bin token shard; a pattern such as "
       "'shards/train_*.bin' takes every match, in name order", cxxopts::value<std::string>()->default_value(r.data))
      ("val-data", "held-out file(s) for evaluation, same forms as --data (default: the last tenth of --data)",
       cxxopts::value<std::string>()->default_value(""))
      ("tokenizer", "Hugging Face tokenizer.json or tiktoken file that encodes text --data files at load (default: "
       "bytes are tokens); the vocabulary is its size unless --vocab is given", cxxopts::value<std::string>()->default_value(""))
      ("shuffle", "llm.c .bin shards: every epoch reads the shards, and the windows of each, in an order drawn "
       "from --seed and the epoch, as llm.c does (--shuffle=false: in name and file order); held-out data is read "
       "in order", cxxopts::value<bool>()->default_value("true"))
      ("digits", "operand digits of the arithmetic task", cxxopts::value<int>()->default_value(std::to_string(r.digits)));
  o.add_options("optimisation")
      ("batch", "global batch in sequences (the same for every layout)", cxxopts::value<int64_t>()->default_value(std::to_string(r.batch)))
      ("seq-len", "tokens per sequence (default: the model context)", cxxopts::value<int64_t>()->default_value("0"))
      ("steps", "optimizer steps, also the length of the lr schedule: a run resumed with more --steps than it "
       "started with stretches the cosine decay (and a capped or -1 warmup) over the new total", cxxopts::value<int64_t>()->default_value(std::to_string(r.steps)))
      ("grad-accum", "microbatches per step (no sync until the last)", cxxopts::value<int>()->default_value("1"))
      ("optimizer", "adamw or sgd", cxxopts::value<std::string>()->default_value(r.optimizer))
      ("lr", "peak learning rate", cxxopts::value<double>()->default_value(std::to_string(r.lr)))
      ("min-lr", "final learning rate of the cosine decay", cxxopts::value<double>()->default_value(std::to_string(r.min_lr)))
      ("warmup", "linear warmup steps, at most --steps (-1: a tenth of --steps)", cxxopts::value<int64_t>()->default_value(std::to_string(r.warmup)))
      ("weight-decay", "AdamW decoupled weight decay", cxxopts::value<double>()->default_value("0.1"))
      ("adam-beta1", "AdamW first-moment decay", cxxopts::value<double>()->default_value("0.9"))
      ("adam-beta2", "AdamW second-moment decay", cxxopts::value<double>()->default_value("0.95"))
      ("adam-eps", "AdamW epsilon", cxxopts::value<double>()->default_value("1e-8"))
      ("momentum", "SGD momentum", cxxopts::value<double>()->default_value("0.9"))
      ("grad-clip", "global gradient-norm clip (0: off)", cxxopts::value<double>()->default_value("1.0"))
      ("seed", "seed of initial weights and data", cxxopts::value<uint64_t>()->default_value(std::to_string(r.seed)));
  o.add_options("precision")
      ("precision", "auto, fp32, or bf16: bf16 matmul operands with fp32 accumulation; fp32 master weights, optimizer "
       "state, norms, softmax and loss. auto: bf16 where this CPU runs bf16 matmuls natively and measurably faster "
       "than fp32 (every rank agreeing), else fp32; the run header says which and why; SHARDLAB_DEFAULT_PRECISION "
       "(fp32 or bf16) decides auto without measuring (docs/mixed_precision.md)",
       cxxopts::value<std::string>()->default_value("auto"))
      ("reduce-dtype", "dtype gradients travel in when they are reduced over data, fsdp and context: fp32; bf16 "
       "(half the bytes); or int8 (block-scaled, about a quarter of the bytes, with error feedback). Every sum is "
       "still taken in fp32 (docs/collectives.md)", cxxopts::value<std::string>()->default_value(r.reduce_dtype))
      ("gather-dtype", "dtype ZeRO-3 / FSDP parameter all-gathers carry: auto (the compute dtype), fp32, bf16, or "
       "int8 (block-scaled; every rank computes with the same int8-rounded weights, the fp32 shards stay exact)",
       cxxopts::value<std::string>()->default_value(r.gather_dtype))
      ("activation-dtype", "dtype activations and their gradients carry between model-parallel ranks (tensor and "
       "sequence parallelism's all_reduces, all_gathers and reduce_scatters, pipeline messages, expert all_to_alls): "
       "auto (the compute dtype), fp32 or bf16. Sums are taken in fp32; fp32 under --precision bf16 keeps these "
       "messages exact at twice the bytes (docs/mixed_precision.md)", cxxopts::value<std::string>()->default_value(r.activation_dtype))
      ("bf16-matmul", "how bf16 matmuls run: auto (oneDNN's bf16 kernels where this CPU has them and they measure "
       "faster than fp32, else fp32 kernels on bf16-rounded operands), native or rounded; the environment variable "
       "SHARDLAB_BF16_MATMUL overrides it", cxxopts::value<std::string>()->default_value(r.bf16_matmul));
  o.add_options("run")
      ("eval-every", "steps between evaluations (0: only at the end)", cxxopts::value<int64_t>()->default_value(std::to_string(r.eval_every)))
      ("eval-batches", "held-out batches per evaluation", cxxopts::value<int64_t>()->default_value(std::to_string(r.eval_batches)))
      ("eval-problems", "arithmetic problems scored per evaluation", cxxopts::value<int64_t>()->default_value(std::to_string(r.eval_problems)))
      ("log-every", "steps between progress lines", cxxopts::value<int64_t>()->default_value(std::to_string(r.log_every)))
      ("metrics", "JSONL file, one object per step, appended to if it exists ('' to disable; default: "
       "metrics.jsonl in --ckpt-dir)", cxxopts::value<std::string>())
      ("ckpt-dir", "directory for checkpoints", cxxopts::value<std::string>()->default_value(r.ckpt_dir))
      ("ckpt-every", "steps between checkpoints (0: only at the end)", cxxopts::value<int64_t>()->default_value("0"))
      ("ckpt-async", "write checkpoints from a background thread: the step waits only for the state's copy "
       "to memory (and for the previous write, one in flight at a time)")
      ("save-step0", "also write ckpt_000000.h5 before the first step: the initial weights, e.g. to load into "
       "another framework")
      ("dump-grads", "write the first step's gradients (averaged, before clipping) with the weights they belong "
       "to, unsharded, to this HDF5 file: optim/grad/<name> beside params/<name> (docs/checkpoint_format.md)",
       cxxopts::value<std::string>()->default_value(""))
      ("resume", "checkpoint file to continue from, or 'latest' (the newest complete one in --ckpt-dir)", cxxopts::value<std::string>()->default_value(""))
      ("init-from", "start from these weights with fresh optimizer state at step 0 (fine-tuning): a shardlab "
       "checkpoint, a Hugging Face model directory or an llm.c model file (docs/models.md); the model flags must "
       "match them",
       cxxopts::value<std::string>()->default_value(""))
      ("on-nonfinite", "a non-finite loss or gradient norm (a diverged run): stop (exit 1, naming the last good "
       "checkpoint) or skip (drop that step's update and go on)", cxxopts::value<std::string>()->default_value(r.on_nonfinite))
      ("max-skips", "--on-nonfinite skip: stop after this many skipped steps in a row",
       cxxopts::value<int64_t>()->default_value(std::to_string(r.max_skips)))
      ("threads", "OpenMP threads per rank (0: runtime default)", cxxopts::value<int>()->default_value("0"))
      ("config", "a JSON or TOML file of flags (keys are flag names), or a checkpoint whose saved settings to "
       "reuse; flags after it override it", cxxopts::value<std::string>())
      ("h,help", "print this help");
  o.add_options("parallel")
      ("mesh", "mesh axes, outermost first, e.g. data=2,tensor=2 (data and fsdp: ZeRO below; pipe: pipeline stages; "
       "expert: MoE experts split; context: slices of every sequence; tensor: Megatron tensor parallelism; any combination whose sizes multiply to the "
       "ranks)", cxxopts::value<std::string>()->default_value(r.mesh))
      ("zero", "ZeRO stage 0-3 over the data axes", cxxopts::value<int>()->default_value("0"))
      ("bucket-mb", "gradient all-reduce bucket size in MiB", cxxopts::value<double>()->default_value("4"))
      ("overlap", "reduce gradient buckets during backward and, under ZeRO-3, prefetch the next block's parameters (--overlap=false: none of it, to measure what overlap hides)",
       cxxopts::value<bool>()->default_value("true"))
      ("reshard-after-forward", "ZeRO-3: free each block's gathered parameters after its forward "
       "(--reshard-after-forward=false keeps them for the backward)", cxxopts::value<bool>()->default_value("true"))
      ("sequence-parallel", "tensor axis: keep norms and residuals on B/t sequences per rank (all_gather and "
       "reduce_scatter instead of all_reduce)", cxxopts::value<bool>()->default_value("false"))
      ("pp-schedule", "pipe axis: gpipe, 1f1b, interleaved (with --pp-virtual) or zero-bubble; its microbatches "
       "are --grad-accum's", cxxopts::value<std::string>()->default_value(r.pp_schedule))
      ("pp-virtual", "pipe axis: stages per rank for the interleaved schedule", cxxopts::value<int>()->default_value("1"))
      ("pp-layers", "pipe axis: blocks per stage, e.g. 3,5 (default: balanced by the cost model's FLOPs)",
       cxxopts::value<std::string>()->default_value(""))
      ("tp-overlap", "with --sequence-parallel: the all_gathers before wqkv and GPT's fc as collective matmuls, "
       "ppermute steps overlapping the matmul", cxxopts::value<bool>()->default_value("false"))
      ("cp-comm", "context axis: ring (K/V blocks passed round while attention computes) or allgather (LLaMA 3's "
       "choice)", cxxopts::value<std::string>()->default_value(r.cp_comm))
      ("cp-load-balance", "context axis: each rank holds chunks i and 2c-1-i of every sequence (head-tail), so the "
       "causal mask's work is even", cxxopts::value<bool>()->default_value("true"))
      ("link-profile", "hardware profile whose links the mesh emulates (shardlab-plan hw)",
       cxxopts::value<std::string>()->default_value("local"))
      ("link-mode", "link emulation: off, account (record emulated time) or delay (hold transfers)",
       cxxopts::value<std::string>()->default_value("off"))
      ("collective-timeout", "seconds a rank may wait in one collective before the job is aborted, naming it "
       "(0: 300 s for the first step, then 10x its time plus 30 s)", cxxopts::value<double>()->default_value("0"))
      ("link-scale", "slow emulated links down by this factor (keep the target's compute/link ratio)",
       cxxopts::value<double>()->default_value("1"))
      ("trace", "write a Chrome/Perfetto trace of every collective to this JSON file",
       cxxopts::value<std::string>()->default_value(""))
      ("probe", "at start-up, measure the peak FLOP/s on every rank (for MFU) and time a stand-in of this rank's "
       "share of the model (for the predicted step); --probe=false starts sooner (0.1-0.5 s) and prints neither",
       cxxopts::value<bool>()->default_value("true"))
      ("dry-run", "plan one step's collectives from the layout alone, check every rank agrees, print the plan "
       "with predicted times, and exit (nothing is allocated or trained)");

  cxxopts::ParseResult p;
  try {
    p = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw bad_command_line(e.what() + expanded.origin_of(e.what()), argc, argv);
  }
  if (p.count("help")) {
    r.help = true;
    r.help_text = o.help();
    return r;
  }
  if (!p.unmatched().empty()) {
    throw UserError("unexpected argument '" + p.unmatched().front() + "'; flags start with --, see --help");
  }
  r.settings = settings_json(p);
  r.model = nn::ModelConfig::preset(p["model"].as<std::string>());
  if (p.count("arch")) {
    r.model.arch = nn::parse_arch(p["arch"].as<std::string>());
    if (r.model.arch == nn::Arch::Gpt) r.model.n_kv_heads = r.model.n_heads;
  }
  auto set = [&p](const char* flag, int64_t& field) {
    if (p.count(flag)) field = p[flag].as<int64_t>();
  };
  set("vocab", r.model.vocab);
  set("context", r.model.context);
  set("d-model", r.model.d_model);
  set("layers", r.model.n_layers);
  set("heads", r.model.n_heads);
  if (p.count("heads") && !p.count("kv-heads") && r.model.arch == nn::Arch::Gpt) r.model.n_kv_heads = r.model.n_heads;
  set("kv-heads", r.model.n_kv_heads);
  set("d-ff", r.model.d_ff);
  if (p.count("rope-theta")) r.model.rope_theta = static_cast<float>(p["rope-theta"].as<double>());
  if (p.count("norm-eps")) r.model.norm_eps = static_cast<float>(p["norm-eps"].as<double>());
  set("experts", r.model.experts);
  set("top-k", r.model.top_k);
  set("moe-every", r.model.moe_every);
  const auto set_real = [&p](const char* flag, float& field) {
    if (p.count(flag)) field = static_cast<float>(p[flag].as<double>());
  };
  set_real("capacity-factor", r.model.capacity_factor);
  set_real("aux-loss-coef", r.model.aux_loss_coef);
  set_real("z-loss-coef", r.model.z_loss_coef);
  for (const char* flag : {"top-k", "moe-every", "capacity-factor", "aux-loss-coef", "z-loss-coef"}) {
    if (p.count(flag) && r.model.experts == 0) {
      throw UserError(std::string("--") + flag + " applies to mixture-of-experts models, and this one is dense; "
                      "add --experts E or use a -moe- preset");
    }
  }
  r.model.remat = nn::parse_remat(p["remat"].as<std::string>());
  r.model.fused_head = nn::parse_fused_head(p["fused-head"].as<std::string>());
  r.data = p["data"].as<std::string>();
  r.val_data = p["val-data"].as<std::string>();
  r.tokenizer = p["tokenizer"].as<std::string>();
  r.shuffle = p["shuffle"].as<bool>();
  if (!r.tokenizer.empty() && !p.count("vocab")) {
    r.model.vocab = text::Tokenizer(text::read_tokenizer_file(r.tokenizer)).vocab_size();
  }
  r.digits = p["digits"].as<int>();
  r.batch = p["batch"].as<int64_t>();
  r.seq_len = p["seq-len"].as<int64_t>();
  r.steps = p["steps"].as<int64_t>();
  r.grad_accum = p["grad-accum"].as<int>();
  r.optimizer = p["optimizer"].as<std::string>();
  r.lr = p["lr"].as<double>();
  r.min_lr = p["min-lr"].as<double>();
  r.warmup = p["warmup"].as<int64_t>();
  r.weight_decay = p["weight-decay"].as<double>();
  r.adam_beta1 = p["adam-beta1"].as<double>();
  r.adam_beta2 = p["adam-beta2"].as<double>();
  r.adam_eps = p["adam-eps"].as<double>();
  r.momentum = p["momentum"].as<double>();
  r.grad_clip = p["grad-clip"].as<double>();
  r.seed = p["seed"].as<uint64_t>();
  r.precision = p["precision"].as<std::string>();
  r.reduce_dtype = p["reduce-dtype"].as<std::string>();
  r.gather_dtype = p["gather-dtype"].as<std::string>();
  r.activation_dtype = p["activation-dtype"].as<std::string>();
  r.bf16_matmul = p["bf16-matmul"].as<std::string>();
  r.eval_every = p["eval-every"].as<int64_t>();
  r.eval_batches = p["eval-batches"].as<int64_t>();
  r.eval_problems = p["eval-problems"].as<int64_t>();
  r.log_every = p["log-every"].as<int64_t>();
  r.ckpt_dir = p["ckpt-dir"].as<std::string>();
  r.metrics = p.count("metrics") ? p["metrics"].as<std::string>()
                                 : (std::filesystem::path(r.ckpt_dir) / "metrics.jsonl").string();
  r.ckpt_every = p["ckpt-every"].as<int64_t>();
  r.save_step0 = p.count("save-step0") > 0;
  r.ckpt_async = p.count("ckpt-async") > 0;
  r.dump_grads = p["dump-grads"].as<std::string>();
  r.resume = p["resume"].as<std::string>();
  r.init_from = p["init-from"].as<std::string>();
  if (!r.resume.empty() && !r.init_from.empty()) {
    throw UserError("--resume and --init-from exclude each other: --resume continues a run with its optimizer "
                    "state and step, --init-from starts a new run from weights; give one");
  }
  r.on_nonfinite = p["on-nonfinite"].as<std::string>();
  r.max_skips = p["max-skips"].as<int64_t>();
  r.threads = p["threads"].as<int>();
  r.mesh = p["mesh"].as<std::string>();
  r.zero = p["zero"].as<int>();
  r.bucket_mb = p["bucket-mb"].as<double>();
  r.overlap = p["overlap"].as<bool>();
  r.sequence_parallel = p["sequence-parallel"].as<bool>();
  r.tp_overlap = p["tp-overlap"].as<bool>();
  r.cp_comm = p["cp-comm"].as<std::string>();
  r.cp_load_balance = p["cp-load-balance"].as<bool>();
  r.pp_schedule = p["pp-schedule"].as<std::string>();
  r.pp_virtual = p["pp-virtual"].as<int>();
  r.pp_layers = parse_int_list("--pp-layers", p["pp-layers"].as<std::string>());
  r.reshard_after_forward = p["reshard-after-forward"].as<bool>();
  r.link_profile = p["link-profile"].as<std::string>();
  r.link_mode = p["link-mode"].as<std::string>();
  r.link_scale = p["link-scale"].as<double>();
  r.collective_timeout = p["collective-timeout"].as<double>();
  r.trace = p["trace"].as<std::string>();
  r.dry_run = p.count("dry-run") > 0;
  r.probe = p["probe"].as<bool>();
  r.validate();
  return r;
}

}  // namespace shardlab::cli
