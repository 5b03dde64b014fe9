#!/usr/bin/env bash
# multihost_restart.sh REPO TRAIN_GPT: launch/run.sh --max-restarts survives a lost host.
# Two network-namespace hosts of one rank each (tests/netns_hosts.sh) train gpt-tiny at
# data=2, saving every 100 steps; once step 300 is saved, the second host dies (marked
# unreachable to the launcher, as ssh to a dead machine fails, then its processes killed
# with SIGKILL). Its namespace stays: deleting it would take the veth pair, and with it the
# first host's own address, down too -- the surviving host's health check then failed,
# now and then, depending on how soon the kernel tore the pair down. run.sh must
# see the job die, find that only the first host answers, relaunch one rank there with
# --mesh data=1 and --resume latest, and finish with exit 0 -- and the restarted part must
# log exactly the losses of an uninterrupted one-process run from the checkpoint it
# resumed (the same layout from the same state: bit for bit). Exit 77 without namespaces.
set -euo pipefail
repo=$1; train=$2
source "$(dirname "$0")/netns_hosts.sh"
netns_hosts_up 1

common=(--model gpt-tiny --batch 8 --steps 1200 --log-every 100 --eval-every 0 --eval-problems 0 --threads 1 --probe=false
        --ckpt-every 100)
( RUN_OPTIONS="--max-restarts 1" on_hosts 2 self,tcp "$train" "${common[@]}" --mesh data=2 --ckpt-dir "$dir/ckpt" \
    --metrics "$dir/job.jsonl" > "$dir/job.out" 2> "$dir/job.err" && echo 0 > "$dir/rc" || echo $? > "$dir/rc" ) &
for _ in $(seq 600); do [ -f "$dir/ckpt/ckpt_000300.h5" ] && break; sleep 0.05; done
[ -f "$dir/ckpt/ckpt_000300.h5" ] || { wait; cat "$dir/job.out" "$dir/job.err"; echo "FAIL: no checkpoint at step 300"; exit 1; }
touch "$dir/down.${addr[1]}"
ip netns pids "${ns[1]}" | xargs -r kill -9
wait
rc=$(cat "$dir/rc")
[ "$rc" = 0 ] || { cat "$dir/job.out" "$dir/job.err"; echo "FAIL: the restarted job exited $rc"; exit 1; }
grep -q "host 10.77.0.2 does not answer" "$dir/job.err" &&
  grep -q "relaunching 1 rank(s) on 1 slot(s) with --mesh data=1 (was data=2" "$dir/job.err" ||
  { cat "$dir/job.err"; echo "FAIL: run.sh did not say which host it left out and what it relaunched"; exit 1; }
resumed=$(sed -n 's/^resumed from \(.*\) at step \([0-9]*\)$/\1 \2/p' "$dir/job.out")
[ -n "$resumed" ] || { cat "$dir/job.out"; echo "FAIL: the relaunch did not resume from a checkpoint"; exit 1; }
read -r checkpoint step <<< "$resumed"
echo "ok: host 2 died; run.sh relaunched on host 1 from $checkpoint (step $step)"
# The uninterrupted run of that layout from that checkpoint.
"$train" "${common[@]}" --mesh data=1 --resume "$checkpoint" --ckpt-dir "$dir/ref" --ckpt-every 0 \
  --metrics "$dir/ref.jsonl" > /dev/null
# "step loss" of each metrics row after the resumed step (a row's keys are sorted).
after() { sed -n 's/.*"loss": \([^,]*\),.*"step": \([0-9]*\).*/\2 \1/p' "$1" | awk -v s="$step" '$1 > s'; }
job=$(after "$dir/job.jsonl") ref=$(after "$dir/ref.jsonl")
[ -n "$ref" ] && [ "$(tail -1 <<< "$job")" = "$(tail -1 <<< "$ref")" ] &&
  [ "$(tail -n "$(wc -l <<< "$ref")" <<< "$job")" = "$ref" ] ||
  { echo "job:"; tail -5 <<< "$job"; echo "reference:"; tail -5 <<< "$ref"; echo "FAIL: the restarted run's losses differ"; exit 1; }
echo "ok: the restarted job logged the uninterrupted run's $(wc -l <<< "$ref") losses after step $step, bit for bit"
