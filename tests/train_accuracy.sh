#!/usr/bin/env bash
# train_accuracy.sh NAME TOLERANCE "FLAGS" LAUNCH...: the default job (gpt-arith on the
# arithmetic task, 2000 steps) trained with FLAGS learns the task as well as without them:
# 100% answer exact-match at the end, and a final held-out loss within TOLERANCE (a
# fraction) of the plain run's, both launched by LAUNCH (train_gpt, or mpiexec -n 2
# train_gpt --mesh data=2). Labelled long: two full runs, several minutes on 2 cores.
#   bf16:  train_accuracy.sh bf16 0.01 "--precision bf16" train_gpt
#   int8:  train_accuracy.sh int8 0.02 "--reduce-dtype int8" mpiexec -n 2 train_gpt --mesh data=2
set -euo pipefail
name=$1 tolerance=$2 flags=$3; shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for run in plain "$name"; do
  extra=()
  [ "$run" = plain ] || read -r -a extra <<< "$flags"
  "$@" "${extra[@]}" --eval-every 1000 --metrics "$dir/$run.jsonl" --ckpt-dir "$dir/$run" > "$dir/$run.out"
  grep '^eval' "$dir/$run.out" | sed "s/^/$run  /"
done
final() { grep '^eval' "$1" | tail -1; }
loss() { final "$1" | sed -n 's/.*held-out loss \([0-9.]*\).*/\1/p'; }
match() { final "$1" | sed -n 's/.*exact-match \([0-9.]*\)%.*/\1/p'; }
lp=$(loss "$dir/plain.out"); lc=$(loss "$dir/$name.out"); mc=$(match "$dir/$name.out")
awk -v m="$mc" 'BEGIN {exit !(m == 100)}' || { echo "FAIL: the $name run reached $mc% exact-match, not 100%"; exit 1; }
awk -v a="$lc" -v b="$lp" -v t="$tolerance" -v n="$name" 'BEGIN {d = (a - b) / b; if (d < 0) d = -d;
    printf "final held-out loss %s %s, plain %s: %.2f%% apart (allowed %.0f%%)\n", n, a, b, 100 * d, 100 * t; exit !(d <= t)}' ||
  { echo "FAIL: the $name run's final loss is further than $tolerance from the plain run's"; exit 1; }
echo "ok: $name learns the default task as the plain run does"
