#!/usr/bin/env bash
# fault_preempt.sh TRAIN_GPT MPIEXEC... : a preempted job saves the step in hand, exits 143,
# and resumes with the losses of an uninterrupted run.
#
# 1. A signal at a random moment (a checkpoint every step, so some land inside a write):
#    SIGTERM to a 1-rank run, SIGUSR1 to rank 1 only of a 2-rank ZeRO-3 run, SIGUSR1 to
#    mpirun (which forwards it to every rank; SIGTERM and SIGINT it answers by ending the
#    job itself).
#    Every rank stops after the same step, "preempted by" is printed, the job exits 143,
#    no .tmp is left, and --resume latest continues with the uninterrupted run's losses,
#    bit for bit, one metrics row per step.
# 2. A second signal ends the run at once: SIGINT, then SIGUSR1 to a rank that cannot reach
#    the step boundary (its peer is stopped): exit 138 (SIGUSR1's default action), without
#    "preempted by".
set -uo pipefail
train=$1; shift
mpiexec=("$@")
source "$(dirname "$0")/fault_common.sh"  # dir; fail, losses, rank_pid
common=(--model gpt-small --batch 4 --seq-len 32 --steps 16 --warmup 1 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 100 --threads 1 --probe=false --ckpt-every 1)
RANDOM=11

reference() {  # reference NAME RANKS ARGS...: the uninterrupted run, $dir/NAME.jsonl
  local name=$1 n=$2; shift 2
  "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" "$@" --metrics "$dir/$name.jsonl" --ckpt-dir "$dir/$name" \
    > /dev/null 2>&1 || fail "$name: the uninterrupted run"
}

preempt() {  # preempt NAME REF RANKS SIGNAL WHO ARGS...: WHO is a rank, or "mpirun"
  local name=$1 ref="$dir/$2" n=$3 signal=$4 who=$5; shift 5
  local run="$dir/$name" attempt rc job
  # A signal that lands in the last of the 16 steps lets the run finish (exit 0, as it
  # should); on a loaded machine the steps can outrun the script, so such a run is tried
  # once more, and a second exit 0 fails.
  for attempt in 1 2; do
    rm -rf "$run" "$run.jsonl"
    SHARDLAB_FAULT_TAG="$run" "${mpiexec[@]}" -n "$n" -x SHARDLAB_FAULT_TAG "$train" "${common[@]}" "$@" \
      --metrics "$run.jsonl" --ckpt-dir "$run" > "$run.out" 2>&1 &
    job=$!
    started+=("$job")
    local target=$job  # found before the run gets going, not in the window the signal aims at
    [ "$who" = mpirun ] || target=$(rank_pid "SHARDLAB_FAULT_TAG=$run" "$who")
    for _ in $(seq 200); do [ -e "$run/ckpt_000001.h5" ] && break; sleep 0.05; done
    sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
    [ -n "$target" ] || { wait $job; echo "$name: the run finished before the signal"; return; }
    local mid_write=no
    kill -"$signal" "$target"
    ls "$run"/*.tmp > /dev/null 2>&1 && mid_write=yes
    wait $job; rc=$?
    [ $rc = 0 ] && [ $attempt = 1 ] && [ -e "$run/ckpt_000016.h5" ] &&
      { echo "$name: the run finished its 16 steps before the signal landed; once more"; continue; }
    break
  done
  [ $rc = 143 ] || { fail "$name: SIG$signal to $who: exit $rc, not 143"; tail -5 "$run.out"; return; }
  local line
  line=$(grep -m1 "^preempted by" "$run.out") || { fail "$name: no 'preempted by' line"; return; }
  ls "$run"/*.tmp > /dev/null 2>&1 && fail "$name: a .tmp file is left"
  local resumed="$run-resumed"
  cp "$run.jsonl" "$resumed.jsonl"
  "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" "$@" --ckpt-dir "$run" --resume latest \
    --metrics "$resumed.jsonl" > "$resumed.out" 2>&1 || { fail "$name: the resume"; grep -m2 error "$resumed.out"; return; }
  diff <(losses "$ref.jsonl") <(losses "$resumed.jsonl") > /dev/null ||
    { fail "$name: the resumed losses (and their steps) differ from the uninterrupted run's"; return; }
  echo "$name: SIG$signal to $who (mid-write: $mid_write) -> exit 143, '$line'; resumed bit-identical"
}

reference one 1
preempt "1 rank" one 1 TERM 0
reference two 2 --mesh data=2 --zero 3
preempt "2 ranks ZeRO-3" two 2 USR1 1 --mesh data=2 --zero 3
preempt "2 ranks ZeRO-3 via mpirun" two 2 USR1 mpirun --mesh data=2 --zero 3

# A second signal. Rank 1 is stopped, so rank 0 waits in a collective and never reaches
# the step boundary: its first signal is pending there, the second finds the default action.
run="$dir/twice"
SHARDLAB_FAULT_TAG="$run" "${mpiexec[@]}" -n 2 -x SHARDLAB_FAULT_TAG "$train" "${common[@]}" --mesh data=2 \
  --steps 100000 --ckpt-every 0 --collective-timeout 60 --metrics "" --ckpt-dir "$run" > "$run.out" 2>&1 &
job=$!
started+=("$job")
for _ in $(seq 400); do grep -q "^step" "$run.out" 2> /dev/null && break; sleep 0.05; done
kill -STOP "$(rank_pid "SHARDLAB_FAULT_TAG=$run" 1)"
kill -INT "$(rank_pid "SHARDLAB_FAULT_TAG=$run" 0)"
sleep 0.3
kill -USR1 "$(rank_pid "SHARDLAB_FAULT_TAG=$run" 0)"
wait $job; rc=$?
[ $rc = 138 ] || fail "second signal: exit $rc, not 138 (SIGUSR1's default action)"
grep -q "^preempted by" "$run.out" && fail "second signal: the run saved and exited instead of ending at once"
echo "second signal: SIGINT then SIGUSR1 to rank 0 -> exit $rc at once"

[ $failures = 0 ] || { echo "$failures failures"; exit 1; }
echo "ok: every preempted run exited 143 with its checkpoint, and resumed bit-identical"
