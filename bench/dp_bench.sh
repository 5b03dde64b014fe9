#!/usr/bin/env bash
# dp_bench.sh: data-parallel scaling, overlap and ZeRO memory on the reference model
# (gpt-bench: V 256, T 256, D 256, L 4, N 4, F 1024; AdamW), measured side by side:
#   1. tokens/s of 1 rank x 1 thread vs 2 ranks x 1 thread at the same per-rank batch (8),
#      for DP (ZeRO-0) and ZeRO-3; gradient communication exposed with and without overlap
#   2. per-rank parameter, gradient and optimizer bytes at 4 ranks for ZeRO-0..3 next to
#      the book's formulas (fp32: 4N params, 4N grads, 8N Adam; each divided by 4 where sharded)
# Usage: bench/dp_bench.sh [build-dir]     (STEPS=12 by default; needs mpirun)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/train_bench.sh "${1:-build}"  # train, steps, tmp, mpi, median
export OMP_NUM_THREADS=1
common=(--model gpt-bench --steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 1000 --threads 1 --ckpt-dir "$tmp/ckpt")

run() {  # name ranks args...: this benchmark's own, with the exposed data-axis communication
  local name=$1 n=$2; shift 2
  "${mpi[@]}" -n "$n" "$train" "${common[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.log"
  printf "%-22s %9.0f tokens/s   step %7.1f ms   exposed comm %6.1f ms\n" "$name" \
    "$(median "$tmp/$name.jsonl" tokens_per_s)" "$(echo "$(median "$tmp/$name.jsonl" step_s)" | awk '{print $1 * 1e3}')" \
    "$(echo "$(median "$tmp/$name.jsonl" exposed_comm_s)" | awk '{print $1 * 1e3}')"
}

echo "== throughput: same per-rank batch (8 sequences x 256 tokens), 1 thread per rank"
run single 1 --batch 8
run dp_x2 2 --batch 16 --mesh data=2
run dp_x2_no_overlap 2 --batch 16 --mesh data=2 --overlap=false
run zero3_x2 2 --batch 16 --mesh data=2 --zero 3
awk -v a="$(median "$tmp/single.jsonl" tokens_per_s)" -v b="$(median "$tmp/dp_x2.jsonl" tokens_per_s)" \
    -v z="$(median "$tmp/zero3_x2.jsonl" step_s)" -v d="$(median "$tmp/dp_x2.jsonl" step_s)" \
    -v e="$(median "$tmp/dp_x2.jsonl" exposed_comm_s)" -v f="$(median "$tmp/dp_x2_no_overlap.jsonl" exposed_comm_s)" 'BEGIN {
  printf "DP speed-up 2 ranks / 1 rank: %.2fx tokens/s\n", b / a
  printf "ZeRO-3 step time / DP step time: %.2fx\n", z / d
  printf "gradient all-reduce hidden behind backward: %.0f%% (exposed %.1f ms with overlap, %.1f ms without)\n",
         (f > 0 ? 100 * (1 - e / f) : 0), e * 1e3, f * 1e3 }'

echo "== memory per rank at 4 ranks (peak during a step), measured vs the book's formula"
printf "%-8s %28s %28s %28s\n" stage "parameters (meas / book)" "gradients (meas / book)" "optimizer (meas / book)"
for zero in 0 1 2 3; do
  "${mpi[@]}" -n 4 "$train" "${common[@]}" --steps 2 --batch 8 --mesh data=4 --zero "$zero" --metrics "" > "$tmp/mem$zero.log"
  awk -v zero="$zero" '
    /^model/ { for (i = 1; i <= NF; ++i) if ($i ~ /M$/ && $(i + 1) == "parameters") n = substr($i, 1, length($i) - 1) * 1e6 }
    /peak during step 1/ {
      split($0, parts, "|")
      for (k = 1; k <= 3; ++k) { split(parts[k], w, " "); m[k] = w[length(w) - 1] " " w[length(w)] }
      p = 4 * n / (zero >= 3 ? 4 : 1) / 1048576; g = 4 * n / (zero >= 2 ? 4 : 1) / 1048576; o = 8 * n / (zero >= 1 ? 4 : 1) / 1048576
      printf "ZeRO-%d %19s / %5.2f MiB %19s / %5.2f MiB %19s / %5.2f MiB\n", zero, m[1], p, m[2], g, m[3], o }' "$tmp/mem$zero.log"
done
