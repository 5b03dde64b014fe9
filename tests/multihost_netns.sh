#!/usr/bin/env bash
# multihost_netns.sh REPO TRAIN_GPT: a real two-host job without a cluster. Two network
# namespaces on this machine joined by a virtual Ethernet pair (tests/netns_hosts.sh),
# each with its own hostname, are the hosts: mpirun starts in the first, reaches the
# second's daemon through an rsh agent that enters that namespace, and the ranks talk
# OpenMPI over TCP only (no shared memory) on that link. One rank per host, launched
# through launch/run.sh with a hostfile; the data=2 run must log the losses of the
# one-process run (the same global batch), and the trace must hold both ranks, the second
# with its clock offset to the first. Needs root and `ip netns`; where namespaces cannot be
# made, it says why and reports skipped (exit 77).
set -euo pipefail
repo=$1; train=$2
source "$(dirname "$0")/netns_hosts.sh"
netns_hosts_up 1

common=(--model gpt-tiny --context 32 --batch 8 --steps 4 --warmup 1 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 1 --threads 1)
"$train" "${common[@]}" --metrics "$dir/one.jsonl" --ckpt-dir "$dir/one" > /dev/null
hosts=$(on_hosts 2 self,tcp hostname 2> /dev/null | sort -u | tr '\n' ' ')
[ "$hosts" = "host-${ns[0]} host-${ns[1]} " ] || { echo "FAIL: the ranks ran on '$hosts', not one on each host"; exit 1; }
on_hosts 2 self,tcp "$train" "${common[@]}" --mesh data=2 --metrics "$dir/two.jsonl" --ckpt-dir "$dir/two" \
  --trace "$dir/trace.json" > "$dir/two.log" 2>&1 || { cat "$dir/two.log"; echo "FAIL: the two-host job failed"; exit 1; }
losses() { grep -o '"loss": [^,]*' "$1" | awk '{print $2}'; }
paste <(losses "$dir/one.jsonl") <(losses "$dir/two.jsonl") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * ($1 < 0 ? -$1 : $1)) bad++ }
  END { if (n != 4 || bad) { print "FAIL: " n " steps, " bad + 0 " losses differ from one process"; exit 1 } }'
grep -q '"rank 1 (clock ' "$dir/trace.json" || { echo "FAIL: the trace does not align rank 1's clock"; exit 1; }
echo "ok: data=2 over two hosts (network namespaces, TCP only) logs the one-process losses:"
paste <(losses "$dir/one.jsonl") <(losses "$dir/two.jsonl") | sed 's/^/  one process, two hosts: /'
