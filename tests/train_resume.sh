#!/usr/bin/env bash
# train_resume.sh TRAIN_GPT: a run resumed from a checkpoint reproduces the losses of an
# uninterrupted run bit for bit (same printed digits in the JSONL metrics).
set -euo pipefail
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model gpt-tiny --context 32 --batch 4 --steps 8 --warmup 2 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 4 --threads 1 --probe=false)
"$train" "${common[@]}" --metrics "$dir/full.jsonl" --ckpt-dir "$dir/full" > /dev/null
"$train" "${common[@]}" --metrics "$dir/part.jsonl" --ckpt-dir "$dir/part" --ckpt-every 3 > /dev/null
# Resume from step 3 (not the final checkpoint) and overwrite the rest of the run.
head -n 3 "$dir/part.jsonl" > "$dir/resumed.jsonl"
"$train" "${common[@]}" --metrics "$dir/resumed.jsonl" --ckpt-dir "$dir/part" --resume "$dir/part/ckpt_000003.h5" > /dev/null
losses() { grep -o '"loss": [^,]*' "$1"; }
if ! diff <(losses "$dir/full.jsonl") <(losses "$dir/resumed.jsonl"); then
  echo "FAIL: resumed losses differ from the uninterrupted run"; exit 1
fi
[ "$(losses "$dir/full.jsonl" | wc -l)" -eq 8 ] || { echo "FAIL: expected 8 steps"; exit 1; }
echo "ok: 8 losses identical after resuming at step 3"
