# Two hosts on one machine, for the multi-host tests and bench/ethernet_bench.sh: two network
# namespaces joined by a virtual Ethernet pair (10.77.0.1 and 10.77.0.2), each with its own
# hostname. mpirun starts in the first and reaches the second's daemon through an rsh agent
# that enters that namespace; OpenMPI's traffic between the hosts takes the veth link (TCP),
# and ranks on one host may use shared memory (vader) between them. Source it with $repo
# set (the source tree); it makes $dir, removed with the namespaces on exit. Needs root and
# `ip netns`; where namespaces cannot be made, it says why and exits 77 (skipped).
#
# netns_hosts_up SLOTS            make the hosts, SLOTS ranks on each ($dir/hostfile)
# on_hosts N BTL PROGRAM ARGS...  launch/run.sh ($RUN_OPTIONS first) from the first host: N ranks, the first
#                                 SLOTS on the first host; BTL: OpenMPI's transports, e.g.
#                                 self,tcp (no shared memory) or self,vader,tcp
# ns[0], ns[1]                    the namespaces; veth[0], veth[1] the link's end in each
# touch $dir/down.ADDRESS         that host stops answering the launcher (as ssh to a dead
#                                 machine fails); kill its processes for the rest
if [ "$(id -u)" -ne 0 ] || ! command -v ip > /dev/null; then
  echo "skip: needs root and iproute2 (ip netns) to make the hosts"; exit 77
fi
netns_tag=sl$$
ns=("${netns_tag}a" "${netns_tag}b") veth=("${netns_tag}0" "${netns_tag}1") addr=(10.77.0.1 10.77.0.2)
dir=$(mktemp -d)
netns_cleanup() { for n in "${ns[@]}"; do ip netns del "$n" 2> /dev/null || true; done; rm -rf "$dir"; }
trap netns_cleanup EXIT

netns_hosts_up() {
  if ! ip netns add "${ns[0]}" 2> "$dir/err"; then
    echo "skip: cannot create a network namespace here: $(cat "$dir/err")"; exit 77
  fi
  ip netns add "${ns[1]}"
  if ! ip link add "${veth[0]}" type veth peer name "${veth[1]}" 2> "$dir/err"; then
    echo "skip: cannot create a virtual Ethernet pair here: $(cat "$dir/err")"; exit 77
  fi
  local i
  for i in 0 1; do
    ip link set "${veth[$i]}" netns "${ns[$i]}"
    ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${veth[$i]}"
    ip -n "${ns[$i]}" link set "${veth[$i]}" up
    ip -n "${ns[$i]}" link set lo up
  done
  # The rsh agent: OpenMPI calls it as `agent [ssh options] HOST COMMAND...`; it runs
  # COMMAND in HOST's namespace under HOST's own hostname.
  cat > "$dir/agent" <<AGENT
#!/usr/bin/env bash
while [[ \$1 == -* ]]; do shift; done
host=\$1; shift
# A host marked down (\$dir/down.HOST) answers as an unreachable one does.
[ -e "$dir/down.\$host" ] && { echo "ssh: connect to host \$host port 22: No route to host" >&2; exit 255; }
case "\$host" in ${addr[0]}) n=${ns[0]} ;; ${addr[1]}) n=${ns[1]} ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$n" unshare --uts bash -c "hostname host-\$n; \$*"
AGENT
  chmod +x "$dir/agent"
  printf '%s slots=%d\n%s slots=%d\n' "${addr[0]}" "$1" "${addr[1]}" "$1" > "$dir/hostfile"
  export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

on_hosts() {
  local ranks=$1 btl=$2; shift 2
  ip netns exec "${ns[0]}" unshare --uts bash -c "hostname host-${ns[0]}; exec \"\$@\"" _ \
    "$repo/launch/run.sh" -n "$ranks" --hostfile "$dir/hostfile" --mca plm_rsh_agent "$dir/agent" \
    --mca btl "$btl" --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    --mca plm_rsh_no_tree_spawn 1 ${RUN_OPTIONS:-} -- "$@"
}
