#!/usr/bin/env bash
# train_precision.sh TRAIN_GPT: --precision bf16 really trains in bf16, on both matmul paths,
# and checkpoints cross precisions.
# - The run header says what runs in bf16, and the losses differ from the fp32 run's (the
#   matmuls rounded their operands) yet stay within 2% of them over 8 steps of gpt-tiny.
# - oneDNN's bf16 kernels (SHARDLAB_BF16_MATMUL=native) and the fp32 kernels on rounded
#   operands (=rounded) multiply the same bf16 values: losses within 2e-3 relative (only
#   fp32 summation order differs; see layout_matrix.sh --bf16 for the bound).
# - A bf16 run resumed in fp32 from its step-4 checkpoint, and an fp32 run resumed in bf16,
#   continue within 2% of the uninterrupted run (the checkpoint holds fp32 master weights
#   whatever the precision, and records the precision it was written under).
set -euo pipefail
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model gpt-tiny --context 32 --batch 8 --steps 8 --warmup 2 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 4 --threads 1 --ckpt-every 4)
losses() { grep -o '"loss": [^,]*' "$1" | awk '{print $2}'; }
# within A B TOLERANCE: every loss of A within TOLERANCE relative of B's; prints the worst.
within() {
  paste <(losses "$1") <(losses "$2") | awk -v t="$3" -v what="$(basename "$1" .jsonl) vs $(basename "$2" .jsonl)" '
    { n++; d = ($1 - $2) / $2; if (d < 0) d = -d; if (d > w) w = d }
    END { printf "%s: worst relative difference %.2e over %d steps\n", what, w, n; exit !(n == 8 && w <= t) }'
}
"$train" "${common[@]}" --metrics "$dir/fp32.jsonl" --ckpt-dir "$dir/fp32" > "$dir/fp32.out"
"$train" "${common[@]}" --precision bf16 --metrics "$dir/bf16.jsonl" --ckpt-dir "$dir/bf16" > "$dir/bf16.out"
grep -q '^dtype   bf16 compute, fp32 master weights' "$dir/bf16.out" || { echo "FAIL: no bf16 line in the run header"; exit 1; }
grep -q '^dtype   fp32 compute' "$dir/fp32.out" || { echo "FAIL: no fp32 line in the fp32 run header"; exit 1; }
if diff -q <(losses "$dir/fp32.jsonl") <(losses "$dir/bf16.jsonl") > /dev/null; then
  echo "FAIL: --precision bf16 gave exactly the fp32 losses: it ran fp32"; exit 1
fi
within "$dir/bf16.jsonl" "$dir/fp32.jsonl" 2e-2
for path in native rounded; do
  SHARDLAB_BF16_MATMUL=$path "$train" "${common[@]}" --precision bf16 --metrics "$dir/$path.jsonl" \
      --ckpt-dir "$dir/$path" > "$dir/$path.out"
  grep -q "bf16 matmuls: $( [ $path = native ] && echo 'bf16 kernels' || echo 'fp32 kernels on bf16-rounded')" "$dir/$path.out" ||
    { echo "FAIL: SHARDLAB_BF16_MATMUL=$path did not take the $path path"; grep '^dtype' "$dir/$path.out"; exit 1; }
done
within "$dir/native.jsonl" "$dir/rounded.jsonl" 2e-3
# Cross-precision resume: the first 4 steps of one run, the last 4 in the other precision.
head -n 4 "$dir/bf16.jsonl" > "$dir/bf16_then_fp32.jsonl"
"$train" "${common[@]}" --resume "$dir/bf16/ckpt_000004.h5" --metrics "$dir/bf16_then_fp32.jsonl" --ckpt-dir "$dir/x" > /dev/null
within "$dir/bf16_then_fp32.jsonl" "$dir/bf16.jsonl" 2e-2
head -n 4 "$dir/fp32.jsonl" > "$dir/fp32_then_bf16.jsonl"
"$train" "${common[@]}" --precision bf16 --resume "$dir/fp32/ckpt_000004.h5" --metrics "$dir/fp32_then_bf16.jsonl" \
    --ckpt-dir "$dir/y" > /dev/null
within "$dir/fp32_then_bf16.jsonl" "$dir/fp32.jsonl" 2e-2
grep -aq 'bf16' "$dir/bf16/ckpt_000008.h5" || { echo "FAIL: the bf16 run's checkpoint does not record its precision"; exit 1; }
echo "ok: bf16 rounds, both matmul paths agree, checkpoints resume across precisions"
