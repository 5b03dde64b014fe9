#!/usr/bin/env bash
# train_metrics.sh TRAIN_GPT: a run's metrics go to its own --ckpt-dir by default, and an
# existing metrics file is never truncated: a second fresh run appends its rows after the
# first run's (saying so), and resuming the second run drops only its own rows past the
# checkpoint, keeping the first run's whole.
set -euo pipefail
train=$1
source "$(dirname "$0")/matrix_common.sh"  # dir; losses, steps
cd "$dir"  # the default --metrics must not land in the working directory's runs/
common=(--model gpt-tiny --warmup 2 --eval-every 0 --eval-batches 1 --eval-problems 0 --log-every 1 --threads 1)

"$train" "${common[@]}" --steps 2 --ckpt-dir "$dir/a" > /dev/null
[ -f "$dir/a/metrics.jsonl" ] || { echo "FAIL: no metrics.jsonl in --ckpt-dir $dir/a"; ls -R "$dir"; exit 1; }
[ ! -e "$dir/runs" ] || { echo "FAIL: a run with --ckpt-dir $dir/a wrote into ./runs"; exit 1; }
cp "$dir/a/metrics.jsonl" "$dir/first.jsonl"

out=$("$train" "${common[@]}" --steps 4 --ckpt-every 2 --seed 7 --ckpt-dir "$dir/a")
grep -q "metrics $dir/a/metrics.jsonl: holds 1 earlier run" <<<"$out" || { echo "FAIL: no notice: $out"; exit 1; }
[ "$(steps "$dir/a/metrics.jsonl")" = "1 2 1 2 3 4 " ] || { echo "FAIL: steps $(steps "$dir/a/metrics.jsonl")"; exit 1; }
cp "$dir/a/metrics.jsonl" "$dir/both.jsonl"

"$train" "${common[@]}" --steps 4 --ckpt-every 2 --seed 7 --ckpt-dir "$dir/a" --resume "$dir/a/ckpt_000002.h5" > /dev/null
[ "$(steps "$dir/a/metrics.jsonl")" = "1 2 1 2 3 4 " ] || { echo "FAIL: after resume, steps $(steps "$dir/a/metrics.jsonl")"; exit 1; }
diff <(losses "$dir/both.jsonl") <(losses "$dir/a/metrics.jsonl") || { echo "FAIL: the resumed losses differ"; exit 1; }
diff <(losses "$dir/first.jsonl") <(losses "$dir/a/metrics.jsonl" | head -2) || { echo "FAIL: the first run's rows changed"; exit 1; }
echo "ok: metrics in --ckpt-dir; a second run appended after the first; its resume kept the first run's rows"
