#!/usr/bin/env bash
# ethernet_bench.sh: flat against two-level all_reduce on shaped Ethernet between 2 hosts
# x 2 ranks. The hosts are two network namespaces joined by a veth pair (tests/netns_hosts.sh);
# inside a host the ranks use shared memory (vader), between hosts TCP over the veth link,
# whose two ends are shaped by tc's token-bucket filter to each rate in RATES (tbf: a rate
# limit, no added latency; this machine has no netem). For each rate bench_collectives
# times all_reduce on the 4-rank data axis with MPI's own (native), shardlab's flat ring
# and two_level, interleaved round by round (best of ROUNDS), and this script prints, per
# size, the measured times and two_level's speed-up over each flat algorithm. A second,
# cheap pass times small sizes (4-512 KiB) at the first rate, with what `auto` runs there.
# Tables and CSV go to $OUT. Needs root and `ip netns` (exit 77 otherwise).
# Usage: bench/ethernet_bench.sh [build-dir]   (RATES="1gbit 10gbit", ROUNDS=3,
#        MIN=1M, MAX=32M, OUT=runs/ethernet)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
bench=$build/examples/bench_collectives
rates=${RATES:-1gbit 10gbit} rounds=${ROUNDS:-3} min=${MIN:-1M} max=${MAX:-32M}
out=$(mkdir -p "${OUT:-$repo/runs/ethernet}" && cd "${OUT:-$repo/runs/ethernet}" && pwd)
source "$repo/tests/netns_hosts.sh"
netns_hosts_up 2
# The same OpenMPI settings for every algorithm. 4 ranks share this machine's cores though
# the hostfile gives 4 slots, so ranks must yield while they wait (without it a 1 MiB
# all_reduce took 60 ms, not 0.7 ms). The TCP BTL's emulated-RDMA pipeline for large
# messages halves a shaped link when both directions carry data (a 16 MiB exchange between
# 2 hosts at 1 Gb/s: 69 MB/s each way; with plain send/recv fragments, 111 MB/s; a Python
# socket pair, 119 MB/s), so it is off.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1} OMPI_MCA_btl_tcp_flags=${OMPI_MCA_btl_tcp_flags:-send}

# shape RATE: both ends of the link, a bucket of 2 ms at the rate (at least 64 KiB).
shape() {
  local bits i
  bits=$(tr -d 'a-z' <<< "$1")
  case "$1" in *gbit) bits=$((bits * 1000000000)) ;; *mbit) bits=$((bits * 1000000)) ;; esac
  local burst=$((bits / 8 / 500 > 65536 ? bits / 8 / 500 : 65536))
  for i in 0 1; do
    ip netns exec "${ns[$i]}" tc qdisc replace dev "${veth[$i]}" root tbf rate "$1" burst "$burst" latency 50ms
  done
}

# two_level over native and ring, per size, from a bench_collectives CSV.
summarise() {  # csv rate
  printf "%-7s %10s %12s %12s %14s %10s %8s\n" link bytes native_ms ring_ms two_level_ms x_native x_ring
  awk -F, -v rate="$2" '
    NR > 1 && $4 == "fp32" { t[$2, $3] = $6; sizes[$2] = 1 }
    END {
      for (b in sizes) {
        printf "%-7s %10d %12.2f %12.2f %14.2f %10.2f %8.2f\n", rate, b, t[b, "native"] * 1e3, t[b, "ring"] * 1e3,
               t[b, "two_level"] * 1e3, t[b, "native"] / t[b, "two_level"], t[b, "ring"] / t[b, "two_level"]
      }
    }' "$1" | sort -n -k2
}

echo "# all_reduce on 2 hosts x 2 ranks (network namespaces; shared memory in a host, TCP between),"
echo "# measured: best of $rounds interleaved rounds, the slowest rank's mean; x_*: that flat time / two_level's"
for rate in $rates; do
  shape "$rate"
  on_hosts 4 self,vader,tcp "$bench" --ops all_reduce --algorithms native,ring,two_level --min-bytes "$min" \
    --max-bytes "$max" --rounds "$rounds" --csv "$out/allreduce_$rate.csv" > "$out/allreduce_$rate.txt" 2>&1 ||
    { cat "$out/allreduce_$rate.txt"; exit 1; }
  grep -q " two_level  *two_level " "$out/allreduce_$rate.txt" ||
    { cat "$out/allreduce_$rate.txt"; echo "two_level ran flat: the mesh did not find 2 hosts x 2 ranks"; exit 1; }
  summarise "$out/allreduce_$rate.csv" "$rate"
done
rate=${rates%% *}
shape "$rate"
echo "# small all_reduces at $rate: native, two_level and auto (the runs column: what auto ran)"
on_hosts 4 self,vader,tcp "$bench" --ops all_reduce --algorithms native,two_level,auto --min-bytes 4K \
  --max-bytes 512K --rounds "$rounds" > "$out/small_$rate.txt" 2>&1 || { cat "$out/small_$rate.txt"; exit 1; }
grep -v '^run.sh' "$out/small_$rate.txt"
