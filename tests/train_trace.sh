#!/usr/bin/env bash
# train_trace.sh TRAIN_GPT MPIEXEC...: a 2-rank ZeRO-3 run with link accounting writes one
# merged Chrome trace holding both ranks' compute spans and collectives, and prints the
# per-axis summary with emulated times.
set -euo pipefail
train=$1; shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$("$@" -n 2 "$train" --model gpt-tiny --batch 8 --steps 2 --mesh data=2 --zero 3 --threads 1 --eval-problems 0 \
      --link-profile tpu-v5e --link-mode account --trace "$dir/trace.json" --metrics "$dir/m.jsonl" --ckpt-dir "$dir")
echo "$out" | tail -3
for rank in 0 1; do
  grep -q "\"pid\":$rank,\"tid\":0,\"args\":{\"name\":\"compute\"}" "$dir/trace.json" || { echo "FAIL: no compute lane for rank $rank"; exit 1; }
  grep -q "\"name\":\"all_gather\".*\"pid\":$rank" "$dir/trace.json" || { echo "FAIL: no all_gather of rank $rank"; exit 1; }
  grep -q "\"name\":\"forward+backward\".*\"pid\":$rank" "$dir/trace.json" || { echo "FAIL: no compute span of rank $rank"; exit 1; }
done
echo "$out" | grep -Eq "^data +2 " || { echo "FAIL: no per-axis summary"; exit 1; }
echo "ok: merged trace with both ranks, per-axis summary printed"
