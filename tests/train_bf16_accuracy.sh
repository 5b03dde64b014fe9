#!/usr/bin/env bash
# train_bf16_accuracy.sh TRAIN_GPT: the default job (gpt-arith on the arithmetic task, 2000
# steps) trained in bf16 learns the task as well as in fp32: 100% answer exact-match at the
# end, and a final held-out loss within 1% of the fp32 run's (labelled long: two full runs,
# several minutes on 2 cores).
set -euo pipefail
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for p in fp32 bf16; do
  "$train" --precision $p --eval-every 1000 --metrics "$dir/$p.jsonl" --ckpt-dir "$dir/$p" > "$dir/$p.out"
  grep '^eval' "$dir/$p.out" | sed "s/^/$p  /"
done
final() { grep '^eval' "$1" | tail -1; }
loss() { final "$1" | sed -n 's/.*held-out loss \([0-9.]*\).*/\1/p'; }
match() { final "$1" | sed -n 's/.*exact-match \([0-9.]*\)%.*/\1/p'; }
lf=$(loss "$dir/fp32.out"); lb=$(loss "$dir/bf16.out"); mb=$(match "$dir/bf16.out")
awk -v m="$mb" 'BEGIN {exit !(m == 100)}' || { echo "FAIL: bf16 reached $mb% exact-match, not 100%"; exit 1; }
awk -v a="$lb" -v b="$lf" 'BEGIN {d = (a - b) / b; if (d < 0) d = -d; printf "final held-out loss bf16 %s, fp32 %s: %.2f%% apart\n", a, b, 100 * d; exit !(d <= 0.01)}' ||
  { echo "FAIL: the bf16 run's final loss is more than 1% from the fp32 run's"; exit 1; }
echo "ok: bf16 learns the default task as fp32 does"
