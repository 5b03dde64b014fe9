#!/usr/bin/env bash
# train_resume_latest.sh TRAIN_GPT: --resume latest takes the newest complete checkpoint
# in --ckpt-dir, passing over a damaged one, says where it resumed, and continues the
# metrics file without duplicate steps: the resumed run's file equals the uninterrupted
# run's, step by step.
set -euo pipefail
train=$1
source "$(dirname "$0")/matrix_common.sh"  # dir; losses, steps
common=(--model gpt-tiny --steps 6 --warmup 2 --eval-every 0 --eval-batches 1 --eval-problems 0 --log-every 1
        --threads 1 --probe=false --metrics "$dir/metrics.jsonl" --ckpt-dir "$dir/ckpt" --ckpt-every 3)
"$train" "${common[@]}" > /dev/null
cp "$dir/metrics.jsonl" "$dir/uninterrupted.jsonl"
head -c 1000 "$dir/ckpt/ckpt_000006.h5" > "$dir/ckpt/damaged" && mv "$dir/ckpt/damaged" "$dir/ckpt/ckpt_000006.h5"
out=$("$train" "${common[@]}" --resume latest)
grep -q "resumed from $dir/ckpt/ckpt_000003.h5 at step 3" <<<"$out" || { echo "FAIL: $out"; exit 1; }
[ "$(steps "$dir/metrics.jsonl")" = "1 2 3 4 5 6 " ] || { echo "FAIL: steps $(steps "$dir/metrics.jsonl")"; exit 1; }
diff <(losses "$dir/uninterrupted.jsonl") <(losses "$dir/metrics.jsonl") || { echo "FAIL: losses differ"; exit 1; }
echo "ok: --resume latest passed over the damaged step-6 checkpoint, resumed at step 3, metrics steps 1..6 once each"
