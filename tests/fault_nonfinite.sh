#!/usr/bin/env bash
# fault_nonfinite.sh TRAIN_GPT MPIEXEC... : a diverged run stops (or skips) on every rank
# with one decision, and never writes a checkpoint with non-finite values.
#
# 1. --lr 1e4 (a real divergence) on 1 rank and on 2 ranks with ZeRO-3: exit 1 with one
#    message naming the step and the last good checkpoint, which is the newest on disk
#    (nothing of the diverged step was saved) and the one --resume latest takes.
# 2. A NaN loss on rank 1 only at step 5 (SHARDLAB_FAULT_NONFINITE, the test hook) of a
#    2-rank ZeRO-3 run: under --on-nonfinite stop both ranks stop at step 5, exit 1; under
#    skip both drop step 5's update, say so once and train to the end (exit 0), and the
#    steps before 5 have the losses of a run without the fault.
# 3. NaN at steps 3, 4 and 5 with --on-nonfinite skip --max-skips 2: stops at step 5.
set -uo pipefail
train=$1; shift
mpiexec=("$@")
source "$(dirname "$0")/fault_common.sh"  # dir; fail, losses, checkpoints
common=(--model gpt-tiny --batch 8 --steps 8 --warmup 0 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 100 --threads 1 --probe=false --ckpt-every 2)

diverge() {  # diverge NAME RANKS ARGS...: --lr 1e4 until the loss is non-finite
  local name=$1 n=$2; shift 2
  local run="$dir/$name"
  "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" --steps 30 --lr 1e4 "$@" --ckpt-dir "$run" > "$run.out" 2>&1
  local rc=$?
  [ $rc = 1 ] || { fail "$name: exit $rc, not 1"; tail -3 "$run.out"; return; }
  local message step named newest
  message=$(grep -m1 "^error: step [0-9]*: .*non-finite" "$run.out") || { fail "$name: no message"; tail -3 "$run.out"; return; }
  [ "$(grep -c "error:" "$run.out")" = 1 ] || fail "$name: more than one error message"
  step=$(sed 's/^error: step \([0-9]*\):.*/\1/' <<< "$message")
  newest=$(checkpoints "$run" | tail -1)
  named=$(grep -o "the last good checkpoint is [^;]*" <<< "$message")
  [ "$named" = "the last good checkpoint is $newest" ] || fail "$name: '$named' is not the newest checkpoint $newest"
  [ "${newest##*ckpt_}" \< "$(printf '%06d' "$step").h5" ] || fail "$name: $newest is not before step $step"
  "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" --steps 30 --lr 1e-3 "$@" --ckpt-dir "$run" --resume latest \
    > "$run-resumed.out" 2>&1 || fail "$name: resuming from the last good checkpoint"
  grep -q "resumed from $newest" "$run-resumed.out" || fail "$name: --resume latest did not take $newest"
  echo "$name: diverged at step $step -> exit 1, last good $(basename "$newest"), resumed from it with a lower --lr"
}
diverge "lr 1e4, 1 rank" 1
diverge "lr 1e4, 2 ranks ZeRO-3" 2 --mesh data=2 --zero 3

zero3=(--mesh data=2 --zero 3)
ref="$dir/clean"
"${mpiexec[@]}" -n 2 "$train" "${common[@]}" "${zero3[@]}" --ckpt-dir "$ref" > /dev/null 2>&1 || fail "the run without a fault"

run="$dir/stop"
SHARDLAB_FAULT_NONFINITE=1:5 "${mpiexec[@]}" -n 2 -x SHARDLAB_FAULT_NONFINITE "$train" "${common[@]}" "${zero3[@]}" \
  --ckpt-dir "$run" > "$run.out" 2>&1
rc=$?
[ $rc = 1 ] || fail "NaN at step 5 on rank 1, stop: exit $rc, not 1"
grep -q "^error: step 5: the loss is non-finite.*last good checkpoint is $run/ckpt_000004.h5" "$run.out" ||
  { fail "NaN at step 5 on rank 1, stop: no message naming step 5 and ckpt_000004.h5"; tail -3 "$run.out"; }
[ "$(checkpoints "$run" | tail -1)" = "$run/ckpt_000004.h5" ] || fail "stop: a checkpoint after step 4 was written"
echo "NaN at step 5 on rank 1 of 2, --on-nonfinite stop: exit $rc, both ranks stopped at step 5"

run="$dir/skip"
SHARDLAB_FAULT_NONFINITE=1:5 "${mpiexec[@]}" -n 2 -x SHARDLAB_FAULT_NONFINITE "$train" "${common[@]}" "${zero3[@]}" \
  --on-nonfinite skip --ckpt-dir "$run" > "$run.out" 2>&1
rc=$?
[ $rc = 0 ] || fail "NaN at step 5 on rank 1, skip: exit $rc, not 0"
[ "$(grep -c "^step 5: non-finite loss; its update is skipped" "$run.out")" = 1 ] || fail "skip: no single 'skipped' line"
[ -e "$run/ckpt_000008.h5" ] || fail "skip: the run did not finish with its checkpoint"
diff <(losses "$ref/metrics.jsonl" | head -4) <(losses "$run/metrics.jsonl" | head -4) > /dev/null ||
  fail "skip: the steps before the fault differ from the run without it"
[ "$(losses "$ref/metrics.jsonl" | sed -n 6p)" != "$(losses "$run/metrics.jsonl" | sed -n 6p)" ] ||
  fail "skip: step 6's loss equals the run without the fault: step 5's update was not dropped"
echo "NaN at step 5 on rank 1 of 2, --on-nonfinite skip: exit $rc, step 5's update dropped on both ranks, trained to step 8"

run="$dir/skips"
SHARDLAB_FAULT_NONFINITE=0:3,4,5 "$train" "${common[@]}" --on-nonfinite skip --max-skips 2 --ckpt-dir "$run" \
  > "$run.out" 2>&1
rc=$?
[ $rc = 1 ] || fail "three NaN steps, --max-skips 2: exit $rc, not 1"
grep -q "^error: step 5: .*for 3 steps in a row, more than --max-skips 2" "$run.out" ||
  { fail "three NaN steps, --max-skips 2: no message"; tail -3 "$run.out"; }
echo "NaN at steps 3-5, --on-nonfinite skip --max-skips 2: skipped 3 and 4, stopped at 5 with exit $rc"

[ $failures = 0 ] || { echo "$failures failures"; exit 1; }
echo "ok: every divergence stopped or skipped on every rank alike, no checkpoint of a diverged step"
