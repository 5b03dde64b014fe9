#!/usr/bin/env bash
# train_config.sh TRAIN_GPT: --config FILE (TOML or JSON) trains exactly as the same flags
# given on the command line, flags after it override it, and a checkpoint's saved settings
# (--config ckpt.h5) resume a run with nothing else repeated, its losses continuing those of
# an uninterrupted run.
set -euo pipefail
train=$1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
losses() { grep -o '"loss": [^,]*' "$1"; }
same() { diff <(losses "$1") <(losses "$2") > /dev/null || { echo "FAIL: $3"; paste <(losses "$1") <(losses "$2"); exit 1; }; }

flags=(--model llama-tiny --context 32 --batch 4 --steps 4 --warmup 1 --lr 0.003 --adam-beta2 0.99 --eval-every 0
       --eval-batches 1 --eval-problems 0 --log-every 1 --threads 1)
"$train" "${flags[@]}" --metrics "$dir/flags.jsonl" --ckpt-dir "$dir/flags" > /dev/null

cat > "$dir/run.toml" <<'TOML'
# the same run as a file: keys are flag names (- or _), tables only group them
model = "llama-tiny"
context = 32
[optimisation]
batch = 4
steps = 4
warmup = 1
lr = 0.003
adam_beta2 = 0.99
[run]
eval-every = 0
eval-batches = 1
eval-problems = 0
log-every = 1
threads = 1
TOML
"$train" --config "$dir/run.toml" --metrics "$dir/toml.jsonl" --ckpt-dir "$dir/toml" > /dev/null
same "$dir/flags.jsonl" "$dir/toml.jsonl" "the TOML config trains differently from its flags"

cat > "$dir/run.json" <<'JSON'
{"model": "llama-tiny", "context": 32, "batch": 4, "steps": 9, "warmup": 1, "lr": 0.003, "adam-beta2": 0.99,
 "eval_every": 0, "eval_batches": 1, "eval_problems": 0, "log_every": 1, "threads": 1, "save-step0": false}
JSON
"$train" --config "$dir/run.json" --steps 4 --metrics "$dir/json.jsonl" --ckpt-dir "$dir/json" > /dev/null
same "$dir/flags.jsonl" "$dir/json.jsonl" "the JSON config with --steps 4 after it trains differently from its flags"
echo "ok: TOML and JSON configs train as their flags; a flag after --config overrides it"

# A checkpoint's saved settings: stop at step 2, then resume naming only the checkpoint.
"$train" "${flags[@]}" --steps 2 --metrics "$dir/part.jsonl" --ckpt-dir "$dir/part" > /dev/null
"$train" --config "$dir/part/ckpt_000002.h5" --resume "$dir/part/ckpt_000002.h5" --steps 4 > "$dir/resumed.log"
grep -q "resumed from $dir/part/ckpt_000002.h5 at step 2" "$dir/resumed.log" || { echo "FAIL: no resume"; exit 1; }
same "$dir/flags.jsonl" "$dir/part.jsonl" "the settings saved in the checkpoint resume differently from an uninterrupted run"
echo "ok: --config ckpt.h5 --resume ckpt.h5 --steps 4 continues the run as if it had not stopped"
