#!/usr/bin/env bash
# train_compressed.sh TRAIN_GPT MPIEXEC...: training with compressed wires (docs/collectives.md).
# Over 30 steps of gpt-tiny at data=2 the losses with int8 gradients (error feedback) stay
# within 2% of the fp32 run's at every logged step, for DP and for ZeRO-3 with int8
# gathers too (the fp32 runs equal one process: the layout matrix checks that); the run
# header says what travels how; and int8 where it cannot apply is refused on every rank,
# naming the values and the fix, before any collective.
set -euo pipefail
train=$1; shift
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model gpt-tiny --batch 8 --mesh data=2 --threads 1 --probe=false --steps 30 --log-every 5 --eval-every 0 --eval-problems 0
        --metrics "" --ckpt-every 0 --ckpt-dir "$dir")
losses() { sed -n 's/^step .*| loss \([0-9.]*\) .*/\1/p' "$1"; }
run() {  # NAME FLAGS...
  local name=$1; shift
  "${mpiexec[@]}" -n 2 "$train" "${common[@]}" "$@" > "$dir/$name.out"
}
close() {  # A B: every logged loss of B within 2% of A's
  paste <(losses "$dir/$1.out") <(losses "$dir/$2.out") |
    awk -v a="$1" -v b="$2" '{d = ($2 - $1) / $1; if (d < 0) d = -d; if (d > worst) worst = d; n++}
         END {printf "%s vs %s: %d logged losses, worst %.3f%% apart\n", b, a, n, 100 * worst; exit !(n >= 6 && worst <= 0.02)}'
}
run dp_fp32
run dp_int8 --reduce-dtype int8
grep -q 'gradients reduced with int8 on the wire (fp32 sums, error feedback)' "$dir/dp_int8.out" ||
  { echo "FAIL: the int8 run's header does not say how gradients travel"; exit 1; }
close dp_fp32 dp_int8 || { echo "FAIL: int8 gradients moved the DP losses by more than 2%"; exit 1; }
run z3_fp32 --zero 3
run z3_int8 --zero 3 --reduce-dtype int8 --gather-dtype int8
grep -q 'sharded parameters gathered as int8' "$dir/z3_int8.out" || { echo "FAIL: the header does not name the int8 gathers"; exit 1; }
close z3_fp32 z3_int8 || { echo "FAIL: int8 gradients and gathers moved the ZeRO-3 losses by more than 2%"; exit 1; }
if diff -q <(losses "$dir/dp_fp32.out") <(losses "$dir/dp_int8.out") > /dev/null; then
  echo "FAIL: the int8 run logged the fp32 run's losses exactly: nothing was compressed"; exit 1
fi

# Refusals: every rank exits 1 with the reason.
refuse() {  # PATTERN FLAGS...
  local pattern=$1; shift
  if "${mpiexec[@]}" -n 2 "$train" "${common[@]}" --steps 1 "$@" > "$dir/refused.out" 2>&1; then
    echo "FAIL: $* was accepted"; exit 1
  fi
  grep -q -- "$pattern" "$dir/refused.out" || { echo "FAIL: $* failed without '$pattern':"; cat "$dir/refused.out"; exit 1; }
  echo "ok: refused $*"
}
refuse "applies to ZeRO-3" --zero 1 --gather-dtype int8
refuse "has one rank over them, so no gradient is ever reduced" --mesh tensor=2 --reduce-dtype int8
refuse "not a wire format; use fp32, bf16 or int8" --reduce-dtype int4
refuse "int8 is a wire format for gradients and gathered weights" --precision int8
echo "ok: compressed wires train within 2% of fp32 and are refused where they cannot apply"
