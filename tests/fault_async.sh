#!/usr/bin/env bash
# fault_async.sh TRAIN_GPT CKPT_COMPARE MPIEXEC... : --ckpt-async writes the checkpoints a
# synchronous run writes, and loses none of them to a kill or a preemption.
#
# 1. The same checkpoints: on 1 rank, on 2 ranks with ZeRO-3 (the state gathered by
#    collectives on the training thread), and on 4 with two pipeline stages (each stage's
#    leader records its part, rank 0 joins them), every tensor of every --ckpt-async
#    checkpoint equals the synchronous run's exactly, and the losses are the same.
# 2. kill -9 inside a background write (SHARDLAB_FAULT_WRITE_HOLD holds the step-2 write's
#    .tmp open until the kill was sent, so the kill surely lands in it): the last complete checkpoint loads, and
#    --resume latest continues with the uninterrupted run's losses, bit for bit.
# 3. SIGTERM with a write in flight: the run saves the step in hand after that write and
#    exits 143 only once both are on disk, no .tmp left; it resumes bit-identical.
# 2 and 3 on 1 rank, and on 2 ranks with ZeRO-3 (the kill and the signal reach rank 1,
# which writes nothing: its peer learns of it, and the job ends or saves as one).
# Prints what it measured: each run's median blocking by a save.
set -uo pipefail
train=$1 compare=$2; shift 2
mpiexec=("$@")
source "$(dirname "$0")/fault_common.sh"  # dir; fail, losses, rank_pid, checkpoints
common=(--model gpt-tiny --batch 4 --seq-len 16 --steps 6 --warmup 1 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 100 --threads 1 --probe=false --ckpt-every 1)

run() {  # run NAME RANKS ARGS...: a run to the end, $dir/NAME (checkpoints) and $dir/NAME.jsonl
  local name=$1 n=$2; shift 2
  "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" "$@" --metrics "$dir/$name.jsonl" --ckpt-dir "$dir/$name" \
    > "$dir/$name.out" 2>&1 || { fail "$name: exit $?"; tail -5 "$dir/$name.out"; }
}

same_checkpoints() {  # same_checkpoints NAME RANKS ARGS...
  local name=$1 n=$2; shift 2
  run "$name-sync" "$n" "$@"
  run "$name-async" "$n" "$@" --ckpt-async
  local step
  for step in 1 2 3 4 5 6; do
    local file=ckpt_00000$step.h5
    "$compare" "$dir/$name-sync/$file" "$dir/$name-async/$file" "" 0 > /dev/null ||
      fail "$name: $file differs between the synchronous and the --ckpt-async run"
  done
  diff <(losses "$dir/$name-sync.jsonl") <(losses "$dir/$name-async.jsonl") > /dev/null ||
    fail "$name: the losses differ"
  echo "$name: 6 checkpoints identical; $(grep -o "the loop blocked [0-9.]* ms per save" "$dir/$name-sync.out") (sync)," \
    "$(grep -o "[0-9.]* ms per save" "$dir/$name-async.out") (--ckpt-async)"
}

same_checkpoints "1 rank" 1
same_checkpoints "2 ranks ZeRO-3" 2 --mesh data=2 --zero 3
# Pipeline stages record their parts on their own leaders, joined on rank 0.
same_checkpoints "4 ranks pipe=2 tensor=2" 4 --mesh pipe=2,tensor=2 --zero 1

# The layouts of parts 2 and 3: a name (also that of the uninterrupted synchronous run of
# part 1), the ranks, the rank the fault reaches, and the flags.
layout_name="" layout_ranks=1 layout_target=0 layout_flags=()
use_layout() {  # use_layout NAME RANKS TARGET FLAGS...
  layout_name=$1 layout_ranks=$2 layout_target=$3; shift 3
  layout_flags=("$@")
}

# Starts NAME with every background write after the first held before its commit until
# $dir/NAME.release exists (SHARDLAB_FAULT_WRITE_HOLD), and waits until the step-2 write is
# in flight (so the step-1 one is complete). The test sends its fault first and only then
# releases the writes, so the fault lands inside the write however slow the machine is.
start_held() {  # start_held NAME
  local run="$dir/$1"
  SHARDLAB_FAULT_TAG="$run" SHARDLAB_FAULT_WRITE_HOLD="$run.release" "${mpiexec[@]}" -n "$layout_ranks" \
    -x SHARDLAB_FAULT_TAG -x SHARDLAB_FAULT_WRITE_HOLD "$train" "${common[@]}" "${layout_flags[@]}" --ckpt-async \
    --metrics "$run.jsonl" --ckpt-dir "$run" > "$run.out" 2>&1 &
  job=$!
  started+=("$job")
  for _ in $(seq 1200); do [ -e "$run/ckpt_000002.h5.tmp" ] && break; sleep 0.05; done
  [ -e "$run/ckpt_000002.h5.tmp" ] || fail "$1: no write of step 2 in flight"
}

# send SIGNAL NAME: SIGNAL to the target rank of run NAME. A kill leaves the writes held (a
# rank that mpirun has yet to tear down must not commit); any other signal releases them once
# sent, as does a failure to send.
send() {
  local pid
  pid=$(rank_pid "SHARDLAB_FAULT_TAG=$dir/$2" "$layout_target")
  if [ -n "$pid" ] && kill "-$1" "$pid"; then
    [ "$1" = KILL ] || touch "$dir/$2.release"
  else
    fail "$2: no rank $layout_target to send SIG$1 to"
    touch "$dir/$2.release"
  fi
}

resumes_exactly() {  # resumes_exactly NAME CHECKPOINT: --resume latest picks it, losses as uninterrupted
  local run="$dir/$1"
  cp "$run.jsonl" "$run-resumed.jsonl"
  "${mpiexec[@]}" -n "$layout_ranks" "$train" "${common[@]}" "${layout_flags[@]}" --ckpt-async --ckpt-dir "$run" \
    --resume latest --metrics "$run-resumed.jsonl" > "$run-resumed.out" 2>&1 ||
    { fail "$1: the resume"; grep -m2 error "$run-resumed.out"; }
  grep -q "^resumed from $run/$2 " "$run-resumed.out" || fail "$1: did not resume from $2"
  diff <(losses "$dir/$layout_name-sync.jsonl") <(losses "$run-resumed.jsonl") > /dev/null ||
    fail "$1: the resumed losses (and their steps) differ from the uninterrupted run's"
}

faults() {  # faults TAG: parts 2 and 3 in the layout in use
  local tag=$1
  start_held "kill$tag"
  send KILL "kill$tag"
  wait "$job"
  [ "$(checkpoints "$dir/kill$tag" | tail -1)" = "$dir/kill$tag/ckpt_000001.h5" ] ||
    fail "kill$tag: ckpt_000001.h5 is not the newest"
  resumes_exactly "kill$tag" ckpt_000001.h5
  echo "$layout_name: kill -9 of rank $layout_target inside the step-2 background write: ckpt_000001.h5 loads," \
    "resumed bit-identical"

  start_held "preempt$tag"
  send TERM "preempt$tag"
  wait "$job"; rc=$?
  [ $rc = 143 ] || { fail "preempt$tag: exit $rc, not 143"; tail -5 "$dir/preempt$tag.out"; }
  ls "$dir/preempt$tag"/*.tmp > /dev/null 2>&1 && fail "preempt$tag: a .tmp file is left"
  # It stops after the step the signal finds (printed), once that step's write and the one
  # in flight before it are on disk.
  stopped=$(grep -m1 -o "stopped after step [0-9]*" "$dir/preempt$tag.out" | grep -o "[0-9]*$")
  saved=$(checkpoints "$dir/preempt$tag" | tail -1)
  [ -n "$stopped" ] && [ "$saved" = "$dir/preempt$tag/ckpt_00000$stopped.h5" ] ||
    fail "preempt$tag: the newest checkpoint is $saved, not that of the step it stopped after ($stopped)"
  resumes_exactly "preempt$tag" "ckpt_00000$stopped.h5"
  echo "$layout_name: SIGTERM to rank $layout_target with the step-2 write in flight: exit $rc after writing up to" \
    "step $stopped; resumed bit-identical"
}
use_layout "1 rank" 1 0
faults ""
use_layout "2 ranks ZeRO-3" 2 1 --mesh data=2 --zero 3
faults "-zero3"

[ $failures = 0 ] || { echo "$failures failures"; exit 1; }
echo "ok: --ckpt-async writes the synchronous checkpoints, and a kill or a preemption loses none"
