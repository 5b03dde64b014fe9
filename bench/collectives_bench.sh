#!/usr/bin/env bash
# collectives_bench.sh: shardlab's collectives against MPI's own, side by side in one run.
#   1. 2 ranks over shared memory (btl vader) and over TCP (btl tcp), 4 KiB to 64 MiB:
#      for every op, the lowest `auto` / native speed ratio and the size where it falls;
#      for reduce_scatter, the ring's and auto's speed over native from 1 MiB up.
#   2. reduce_scatter on 4 and 8 ranks oversubscribed on this machine's cores.
#   3. the wrapper's overhead over a bare MPI_Allreduce for 4-4096 B messages.
# Every ratio compares times measured in the same launch, interleaved round by round
# (bench_collectives' best of ROUNDS). Raw tables and CSV files go to $OUT.
# Usage: bench/collectives_bench.sh [build-dir]     (ROUNDS=7, LAUNCHES=1, OUT=runs/collectives)
# LAUNCHES > 1 repeats part 1 in fresh processes: on a shared machine whole launches can be
# slow (see docs/collectives.md, "Measured here").
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bench=$build/examples/bench_collectives
rounds=${ROUNDS:-7}
launches=${LAUNCHES:-1}
out=${OUT:-runs/collectives}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --bind-to none)

# Lowest auto/native per op, and reduce_scatter's ring and auto over native per size >= 1 MiB.
summarise() {  # csv
  awk -F, 'NR > 1 {
      if ($3 == "auto" && (!($1 in low) || $9 < low[$1])) { low[$1] = $9; at[$1] = $2 }
      if ($1 == "reduce_scatter" && $2 >= 1048576 && ($3 == "ring" || $3 == "auto")) {
        rs[$3] = rs[$3] sprintf(" %dM:%.2f", $2 / 1048576, $9)
        if (!($3 in rsmin) || $9 < rsmin[$3]) rsmin[$3] = $9
      }
    }
    END {
      for (op in low) printf "  %-15s auto/native lowest %.2f (at %d KiB)\n", op, low[op], at[op] / 1024
      for (a in rs) printf "  reduce_scatter %-4s over native, 1-64 MiB (lowest %.2f):%s\n", a, rsmin[a], rs[a]
    }' "$1"
}

for launch in $(seq 1 "$launches"); do
  for net in shm tcp; do
    btl=$([ "$net" = shm ] && echo self,vader || echo self,tcp)
    name=$out/2ranks_${net}_$launch
    "${mpi[@]}" -n 2 --mca btl "$btl" "$bench" --algorithms native,auto,ring --rounds "$rounds" --csv "$name.csv" > "$name.txt"
    echo "2 ranks, $net (btl $btl), launch $launch:"
    summarise "$name.csv"
  done
done

for n in 4 8; do
  name=$out/${n}ranks_shm
  "${mpi[@]}" -n "$n" "$bench" --ops reduce_scatter --algorithms native,auto,ring --min-bytes 64K --rounds "$rounds" \
    --csv "$name.csv" > "$name.txt"
  echo "$n ranks oversubscribed, shared memory, reduce_scatter over native:"
  awk -F, 'NR > 1 && $3 != "native" { r[$3] = r[$3] sprintf(" %dK:%.2f", $2 / 1024, $9) }
           END { for (a in r) printf "  %-5s%s\n", a, r[a] }' "$name.csv"
done

echo "wrapper overhead over bare MPI_Allreduce, 2 ranks:"
"${mpi[@]}" -n 2 "$bench" --overhead | tee "$out/overhead.txt" | sed 's/^/  /'
