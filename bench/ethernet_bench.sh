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
#
# WIRES=1 measures the wire formats instead (docs/collectives.md, "Compressed wires on
# Ethernet"): at each rate, a reduce_scatter and an all_reduce of WIRE_BYTES (fp32 data)
# on the ring with fp32, bf16 and int8 wires, interleaved, on 2 hosts x L ranks for each L
# in WIRE_LAYOUTS (L=1: the only path is TCP between the hosts); then the same on two ranks
# over unshaped loopback TCP in one host, where the codec costs about what it saves; then,
# at the first rate on 2 hosts x 1 rank, gpt-bench's training step with each wire for DP
# (data=2) and FSDP (ZeRO-3, parameter all-gathers in the same wire), beside one process
# alone at the same per-rank batch, runs interleaved round by round. It prints the times,
# each wire's speed-up over fp32, and per wire the per-rank tokens t* at which the measured
# communication equals the compute (from runs with --overlap=false: both timed whole).
# Usage: bench/ethernet_bench.sh [build-dir]   (RATES="1gbit 10gbit", ROUNDS=3,
#        MIN=1M, MAX=32M, OUT=runs/ethernet; with WIRES=1: WIRE_BYTES=64M,
#        WIRE_LAYOUTS="1 2", TRAIN_BATCHES="1 2 4 8" sequences per rank, TRAIN_STEPS=6,
#        TRAIN_ROUNDS=2; TRAIN_BATCHES="" skips training)
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

if [ "${WIRES:-0}" = 1 ]; then
  wire_bytes=${WIRE_BYTES:-64M} wire_layouts=${WIRE_LAYOUTS:-1 2}
  train_batches=${TRAIN_BATCHES-1 2 4 8} train_steps=${TRAIN_STEPS:-6} train_rounds=${TRAIN_ROUNDS:-2}
  train=$build/examples/train_gpt
  source "$repo/bench/metrics.sh"  # median

  # layout L: the transports and the placement of 2 hosts x L ranks. One rank per host needs
  # OpenMPI to place ranks host by host (it fills a host's slots first otherwise).
  layout() {
    if [ "$1" = 1 ]; then
      btl=self,tcp; export OMPI_MCA_rmaps_base_mapping_policy=node
    else
      btl=self,vader,tcp; unset OMPI_MCA_rmaps_base_mapping_policy
    fi
  }

  # wires_table CSV LINK LAYOUT: per op, each wire's time and its speed-up over fp32.
  wires_table() {
    awk -F, -v link="$2" -v layout="$3" '
      NR > 1 { t[$1, $4] = $6 * 1e3; mib[$1] = $2 / 1048576 }
      END {
        for (op in mib) {
          printf "%-8s %-12s %-15s %4d %9.1f %9.1f %9.1f %7.2f %7.2f\n", link, layout, op, mib[op], t[op, "fp32"],
                 t[op, "bf16"], t[op, "int8"], t[op, "fp32"] / t[op, "bf16"], t[op, "fp32"] / t[op, "int8"]
        }
      }' "$1" | sort -k3
  }

  # The two ops with every wire on the ring, all interleaved.
  # shellcheck disable=SC2054  # commas inside flag values
  wires=("$bench" --ops reduce_scatter,all_reduce --algorithms ring --dtype fp32,bf16,int8 --min-bytes "$wire_bytes"
         --max-bytes "$wire_bytes" --rounds "$rounds")

  layout 1
  [ "$(on_hosts 2 "$btl" /bin/hostname 2> /dev/null | sort -u | wc -l)" = 2 ] ||
    { echo "2 ranks did not land on 2 hosts"; exit 1; }
  echo "# $wire_bytes of fp32 data on the ring, fp32, bf16 and int8 wires (int8 with error feedback), measured:"
  echo "# best of $rounds interleaved rounds, the slowest rank's mean; x_*: fp32's time / that wire's"
  printf "%-8s %-12s %-15s %4s %9s %9s %9s %7s %7s\n" link layout op MiB fp32_ms bf16_ms int8_ms x_bf16 x_int8
  for rate in $rates; do
    shape "$rate"
    for l in $wire_layouts; do
      layout "$l"
      log=$out/wires_${rate}_2x$l
      on_hosts $((2 * l)) "$btl" "${wires[@]}" --csv "$log.csv" > "$log.txt" 2>&1 || { cat "$log.txt"; exit 1; }
      wires_table "$log.csv" "$rate" "2x$l(hosts)"
    done
  done
  unset OMPI_MCA_rmaps_base_mapping_policy
  "$repo/launch/run.sh" -n 2 --mca btl self,tcp -- "${wires[@]}" --csv "$out/wires_loopback.csv" \
    > "$out/wires_loopback.txt" 2>&1 || { cat "$out/wires_loopback.txt"; exit 1; }
  wires_table "$out/wires_loopback.csv" loopback "1x2(tcp)"

  [ -n "$train_batches" ] || exit 0
  # The training steps.
  rate=${rates%% *}
  shape "$rate"
  layout 1
  mkdir -p "$dir/train"
  # train NAME RANKS PER-RANK-BATCH ARGS...: one run; appends "NAME batch step_s exposed_s compute_s"
  # (medians over its steps but the first two) to $dir/train/runs.
  train() {
    local name=$1 n=$2 b=$3; shift 3
    local args=(--model gpt-bench --batch $((n * b)) --steps "$train_steps" --warmup 1 --eval-every 0 --eval-problems 0
                --log-every 1000 --threads 1 --ckpt-every 0 --ckpt-dir "$dir/train/ckpt" --metrics "$dir/train/m.jsonl" "$@")
    rm -rf "$dir/train/m.jsonl" "$dir/train/ckpt"
    if [ "$n" = 1 ]; then
      "$repo/launch/run.sh" -n 1 -- "$train" "${args[@]}" > "$dir/train/log" 2>&1
    else
      on_hosts "$n" "$btl" "$train" --mesh data="$n" "${args[@]}" > "$dir/train/log" 2>&1
    fi || { cat "$dir/train/log"; exit 1; }
    echo "$name $b $(median "$dir/train/m.jsonl" step_s) $(median "$dir/train/m.jsonl" exposed_comm_s)" \
         "$(median "$dir/train/m.jsonl" compute_s)" >> "$dir/train/runs"
  }
  for b in $train_batches; do
    for _ in $(seq "$train_rounds"); do
      train single 1 "$b"
      for w in fp32 bf16 int8; do
        train "dp_$w" 2 "$b" --reduce-dtype "$w"
        train "dp_serial_$w" 2 "$b" --reduce-dtype "$w" --overlap=false
        train "fsdp_$w" 2 "$b" --zero 3 --reduce-dtype "$w" --gather-dtype "$w"
      done
    done
  done
  cp "$dir/train/runs" "$out/train_runs.txt"
  echo "# gpt-bench training steps at $rate, 2 hosts x 1 rank, --threads 1, $train_steps steps a run; per run the"
  echo "# median step (all but the first two), the best of $train_rounds interleaved rounds; tokens/s/rank: per rank;"
  echo "# x_fp32: fp32's step / this one; vs_single: tokens/s per rank / one process alone at the same per-rank batch"
  echo "# t*: the per-rank tokens at which the step's communication equals its compute, from the --overlap=false"
  echo "# runs (communication not hidden): tokens x comm / compute"
  printf "%-18s %5s %9s %14s %11s %11s %7s %9s %8s\n" run batch step_ms tokens/s/rank exposed_ms compute_ms x_fp32 vs_single "t*"
  awk -v seq=256 '
    { k = $1 " " $2; if (!(k in best) || $3 < step[k]) { best[k] = 1; step[k] = $3; exp_[k] = $4; comp[k] = $5; name[k] = $1; b[k] = $2 } }
    END {
      for (k in best) {
        split(k, p, " "); base = step["dp_fp32 " p[2]]; fam = name[k]; sub(/_(fp32|bf16|int8)$/, "_fp32", fam)
        tstar = name[k] ~ /serial/ && comp[k] > 0 ? sprintf("%.0f", b[k] * seq * exp_[k] / comp[k]) : "-"
        printf "%-18s %5d %9.1f %14.0f %11.1f %11.1f %7.2f %9.2f %8s\n", name[k], b[k], step[k] * 1e3, b[k] * seq / step[k],
               exp_[k] * 1e3, comp[k] * 1e3, step[fam " " p[2]] / step[k], step["single " p[2]] / step[k], tstar
      }
    }' "$dir/train/runs" | sort -k2,2n -k1,1
  echo "# per wire: t* (the median over batches), and the smallest batch at which DP's tokens/s per rank reach 90%"
  echo "# of one process's (with overlap)"
  awk -v seq=256 '
    { k = $1 " " $2; if (!(k in step) || $3 < step[k]) { step[k] = $3; exp_[k] = $4; comp[k] = $5 }
      if (!($2 in seen)) { seen[$2] = 1; bs[++nb] = $2 } }
    END {
      for (i = 2; i <= nb; ++i) for (j = i; j > 1 && bs[j - 1] + 0 > bs[j] + 0; --j) { x = bs[j]; bs[j] = bs[j - 1]; bs[j - 1] = x }
      split("fp32 bf16 int8", wires, " ")
      for (wi = 1; wi <= 3; ++wi) {
        w = wires[wi]; m = 0; reach = "none measured"
        for (i = 1; i <= nb; ++i) {
          b = bs[i]; k = "dp_serial_" w " " b
          if (k in step && comp[k] > 0) {
            v = b * seq * exp_[k] / comp[k]
            for (j = ++m; j > 1 && t[j - 1] > v; --j) t[j] = t[j - 1]
            t[j] = v
          }
          k = "dp_" w " " b
          if (reach == "none measured" && k in step && step["single " b] / step[k] >= 0.9) reach = b " sequences"
        }
        if (m == 0) continue
        med = m % 2 ? t[(m + 1) / 2] : (t[m / 2] + t[m / 2 + 1]) / 2
        printf "%s: t* = %.0f tokens per rank (%.1f sequences of %d); DP at 90%% of one process from %s\n", w, med, med / seq, seq, reach
      }
    }' "$dir/train/runs"
  exit 0
fi

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
