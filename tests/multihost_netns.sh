#!/usr/bin/env bash
# multihost_netns.sh REPO TRAIN_GPT: a real two-host job without a cluster. Two network
# namespaces on this machine, joined by a virtual Ethernet pair (10.77.0.1 and 10.77.0.2),
# each with its own hostname, are the hosts: mpirun starts in the first, reaches the
# second's daemon through an rsh agent that enters that namespace, and the ranks talk
# OpenMPI over TCP only (no shared memory) on that link. One rank per host, launched
# through launch/run.sh with a hostfile; the data=2 run must log the losses of the
# one-process run (the same global batch), and the trace must hold both ranks, the second
# with its clock offset to the first. Needs root and `ip netns`; where namespaces cannot be
# made, it says why and reports skipped (exit 77).
set -euo pipefail
repo=$1; train=$2
if [ "$(id -u)" -ne 0 ] || ! command -v ip > /dev/null; then
  echo "skip: needs root and iproute2 (ip netns) to make the hosts"; exit 77
fi
tag=sl$$
ns=("${tag}a" "${tag}b") addr=(10.77.0.1 10.77.0.2)
dir=$(mktemp -d)
cleanup() { for n in "${ns[@]}"; do ip netns del "$n" 2> /dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
if ! ip netns add "${ns[0]}" 2> "$dir/err"; then
  echo "skip: cannot create a network namespace here: $(cat "$dir/err")"; exit 77
fi
ip netns add "${ns[1]}"
if ! ip link add "${tag}0" type veth peer name "${tag}1" 2> "$dir/err"; then
  echo "skip: cannot create a virtual Ethernet pair here: $(cat "$dir/err")"; exit 77
fi
for i in 0 1; do
  ip link set "${tag}$i" netns "${ns[$i]}"
  ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${tag}$i"
  ip -n "${ns[$i]}" link set "${tag}$i" up
  ip -n "${ns[$i]}" link set lo up
done

# The rsh agent: OpenMPI calls it as `agent [ssh options] HOST COMMAND...`; it runs COMMAND
# in HOST's namespace under HOST's own hostname.
cat > "$dir/agent" <<AGENT
#!/usr/bin/env bash
while [[ \$1 == -* ]]; do shift; done
host=\$1; shift
case "\$host" in ${addr[0]}) n=${ns[0]} ;; ${addr[1]}) n=${ns[1]} ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$n" unshare --uts bash -c "hostname host-\$n; \$*"
AGENT
chmod +x "$dir/agent"
printf '%s slots=1\n%s slots=1\n' "${addr[0]}" "${addr[1]}" > "$dir/hostfile"

export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--model gpt-tiny --context 32 --batch 8 --steps 4 --warmup 1 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 1 --threads 1)
"$train" "${common[@]}" --metrics "$dir/one.jsonl" --ckpt-dir "$dir/one" > /dev/null
# on_hosts PROGRAM ARGS...: launch/run.sh from the first host, one rank on each.
on_hosts() {
  ip netns exec "${ns[0]}" unshare --uts bash -c "hostname host-${ns[0]}; exec \"\$@\"" _ \
    "$repo/launch/run.sh" -n 2 --hostfile "$dir/hostfile" --mca plm_rsh_agent "$dir/agent" \
    --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    --mca plm_rsh_no_tree_spawn 1 -- "$@"
}
hosts=$(on_hosts hostname 2> /dev/null | sort -u | tr '\n' ' ')
[ "$hosts" = "host-${ns[0]} host-${ns[1]} " ] || { echo "FAIL: the ranks ran on '$hosts', not one on each host"; exit 1; }
on_hosts "$train" "${common[@]}" --mesh data=2 --metrics "$dir/two.jsonl" --ckpt-dir "$dir/two" \
  --trace "$dir/trace.json" > "$dir/two.log" 2>&1 || { cat "$dir/two.log"; echo "FAIL: the two-host job failed"; exit 1; }
losses() { grep -o '"loss": [^,]*' "$1" | awk '{print $2}'; }
paste <(losses "$dir/one.jsonl") <(losses "$dir/two.jsonl") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * ($1 < 0 ? -$1 : $1)) bad++ }
  END { if (n != 4 || bad) { print "FAIL: " n " steps, " bad + 0 " losses differ from one process"; exit 1 } }'
grep -q '"rank 1 (clock ' "$dir/trace.json" || { echo "FAIL: the trace does not align rank 1's clock"; exit 1; }
echo "ok: data=2 over two hosts (network namespaces, TCP only) logs the one-process losses:"
paste <(losses "$dir/one.jsonl") <(losses "$dir/two.jsonl") | sed 's/^/  one process, two hosts: /'
