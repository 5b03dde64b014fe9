#!/usr/bin/env bash
# fault_kill.sh TRAIN_GPT MPIEXEC... : train_gpt survives being killed.
#
# 1. kill -9 during checkpoint writes (TRIALS each, default 5; a checkpoint every step, so
#    most kills land inside a write): on 1 rank, and on 2 ranks with ZeRO-3 where one
#    rank is killed. After each kill the newest complete checkpoint loads (--resume
#    latest), the next start removes the interrupted write's .tmp file, and the resumed
#    run's losses equal the uninterrupted run's bit for bit, with one metrics row per step
#    (a step's row is written before its checkpoint).
# 2. SIGSTOP of one rank of a 2- and a 4-rank job with --collective-timeout 3: the other
#    ranks' watchdogs end the job, non-zero, within 30 s, naming the collective they
#    waited in and the stopped rank as the one missing (it did not answer them).
# 3. kill -9 of one rank of a 2- and a 4-rank job: the job ends non-zero within 30 s, and
#    the message names the dead rank. No process of the job is left behind.
# Prints what it measured (kills that landed mid-write, seconds to exit).
set -uo pipefail
train=$1; shift
mpiexec=("$@")
trials=${TRIALS:-5}
source "$(dirname "$0")/fault_common.sh"  # dir; fail, losses, tagged_pids, rank_pid
trap 'pkill -9 -f "$dir" 2> /dev/null; rm -rf "$dir"' EXIT
common=(--model gpt-small --batch 4 --seq-len 32 --steps 40 --warmup 1 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 100 --threads 1 --probe=false --ckpt-every 1)
RANDOM=7

kill_during_writes() {  # kill_during_writes NAME RANKS ARGS...
  local name=$1 n=$2; shift 2
  local ref="$dir/$name-ref"
  "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" "$@" --metrics "$ref.jsonl" --ckpt-dir "$ref" > /dev/null 2>&1 ||
    { fail "$name: the uninterrupted run"; return; }
  local mid_write=0 exact=0 kills=0 t
  for ((t = 0; t < trials; ++t)); do
    local run="$dir/$name-$t"
    SHARDLAB_FAULT_TAG="$run" "${mpiexec[@]}" -n "$n" -x SHARDLAB_FAULT_TAG "$train" "${common[@]}" "$@" \
      --metrics "$run.jsonl" --ckpt-dir "$run" > "$run.out" 2>&1 &
    local job=$!
    # Wait for the first checkpoint, then kill at a random moment of the next half second.
    for _ in $(seq 200); do [ -e "$run/ckpt_000001.h5" ] && break; sleep 0.05; done
    sleep "0.$((RANDOM % 5))$((RANDOM % 10))"
    local victim
    victim=$(rank_pid "SHARDLAB_FAULT_TAG=$run" $((n - 1)))
    if [ -z "$victim" ]; then  # the run ended first (a fast machine): nothing to resume
      wait $job 2> /dev/null
      echo "$name trial $t: the run finished before the kill"
      continue
    fi
    kill -9 "$victim"
    kills=$((kills + 1))
    ls "$run"/*.tmp > /dev/null 2>&1 && mid_write=$((mid_write + 1))
    wait $job 2> /dev/null
    local resumed="$run-resumed"
    cp "$run.jsonl" "$resumed.jsonl" 2> /dev/null || : > "$resumed.jsonl"
    if ! "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" "$@" --ckpt-dir "$run" --resume latest \
        --metrics "$resumed.jsonl" > "$resumed.out" 2>&1; then
      fail "$name trial $t: resume after the kill"; grep -m2 "error" "$resumed.out"; continue
    fi
    ls "$run"/*.tmp > /dev/null 2>&1 && fail "$name trial $t: a .tmp file is left after the next start"
    if diff <(losses "$ref.jsonl") <(losses "$resumed.jsonl") > /dev/null; then
      exact=$((exact + 1))
    else
      fail "$name trial $t: the resumed losses (and their steps) differ from the uninterrupted run's"
      diff <(losses "$ref.jsonl") <(losses "$resumed.jsonl") | head -4
    fi
  done
  echo "$name: $kills kills -9, $mid_write inside a checkpoint write; $exact of $kills resumes bit-identical"
}

kill_during_writes "1 rank" 1
kill_during_writes "2 ranks ZeRO-3" 2 --mesh data=2 --zero 3

stop_or_kill() {  # stop_or_kill SIGNAL N V: signals rank V of an N-rank job, times the job's end
  local signal=$1 n=$2 v=$3 run="$dir/signal-$1-$2"
  local start=$SECONDS
  SHARDLAB_FAULT_TAG="$run" "${mpiexec[@]}" -n "$n" -x SHARDLAB_FAULT_TAG "$train" "${common[@]}" --mesh data="$n" \
    --steps 100000 --ckpt-every 0 --collective-timeout 3 --ckpt-dir "$run" > "$run.out" 2>&1 &
  local job=$!
  for _ in $(seq 400); do grep -q "^step" "$run.out" 2> /dev/null && break; sleep 0.05; done
  local victim
  victim=$(rank_pid "SHARDLAB_FAULT_TAG=$run" "$v")
  [ -n "$victim" ] || { fail "SIG$signal: rank $v not found"; kill -9 $job; return; }
  kill -"$signal" "$victim"
  local waited=0
  while kill -0 $job 2> /dev/null && [ $waited -lt 300 ]; do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 $job 2> /dev/null; then
    fail "SIG$signal of rank $v of $n: the job is still running after 30 s"; kill -9 $job; kill -9 "$victim"; return
  fi
  wait $job; local rc=$?
  [ $rc -ne 0 ] || fail "SIG$signal of rank $v of $n: the job exited 0"
  local named
  if [ "$signal" = STOP ]; then
    named=$(grep -m1 -o "watchdog: missing: rank $v did not answer" "$run.out")
  else  # the launcher sees the death first, or a watchdog its silence
    named=$(grep -m1 -o "rank $v with PID [0-9]* on node [^ ]* exited on signal 9\|watchdog: missing: rank $v did not answer" "$run.out")
  fi
  [ -n "$named" ] || { fail "SIG$signal of rank $v of $n: no message names rank $v"; sed 's/^/    /' "$run.out" | tail -15; }
  [ -z "$(tagged_pids "SHARDLAB_FAULT_TAG=$run")" ] || fail "SIG$signal: processes of the job left behind"
  echo "SIG$signal of rank $v of $n: the job ended with exit $rc after $((SECONDS - start)) s ($named)"
}
stop_or_kill STOP 2 1
stop_or_kill KILL 2 1
stop_or_kill STOP 4 2
stop_or_kill KILL 4 2

[ $failures = 0 ] || { echo "$failures failures"; exit 1; }
echo "ok: no checkpoint lost, every resume exact, hung and dead ranks end the job"
