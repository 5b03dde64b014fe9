#!/usr/bin/env bash
# pipeline_bubble.sh: the pipeline bubble against microbatches, for each schedule (the
# book's chapter on pipelining; docs/pipeline.md): pipe=2 on 2 ranks of 1 thread, gpt-bench
# with 4 layers (2 per stage; interleaved: 2 virtual stages of 1 layer per rank), a global
# batch of 16 x 128 tokens cut into m = 1, 2, 4, 8, 16 microbatches (interleaved takes them
# in groups of p: from m = 2).
#
# Measured: the idle fraction of the schedule's wall time, mean over the pipe ranks (the
# JSONL's pipeline_bubble), median over STEPS steps less the first two. Predicted: the
# schedule's own simulation, which equals the closed forms (p-1)/(m+p-1) for GPipe and
# 1F1B, (p-1)/(v m+p-1) interleaved, (p-1)/(3m+p-1) zero-bubble (the JSONL's
# pipeline_bubble_predicted). Writes OUT/pipeline_bubble.csv and prints the table; the
# plot: bench/experiments/plot.py pipeline_bubble OUT/pipeline_bubble.csv.
# Usage: bench/experiments/pipeline_bubble.sh [build-dir]   (STEPS=6, OUT=runs/experiments)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train_bench.sh "${1:-build}"  # train, steps, tmp, mpi, median
steps=${STEPS:-6}
out=${OUT:-runs/experiments}
mkdir -p "$out"
csv=$out/pipeline_bubble.csv
common=(--model gpt-bench --seq-len 128 --batch 16 --steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 1000 --threads 1 --ckpt-dir "$tmp/ckpt")
echo "schedule,microbatches,bubble,bubble_predicted,step_s" > "$csv"
printf "%-12s %4s %10s %10s %9s\n" schedule m measured predicted "step ms"
for schedule in gpipe 1f1b interleaved zero-bubble; do
  extra=()
  [ "$schedule" = interleaved ] && extra=(--pp-virtual 2)
  microbatches="1 2 4 8 16"
  [ "$schedule" = interleaved ] && microbatches="2 4 8 16"  # groups of p microbatches
  for m in $microbatches; do
    m_file=$tmp/$schedule-$m.jsonl
    OMP_NUM_THREADS=1 "${mpi[@]}" -n 2 "$train" "${common[@]}" --mesh pipe=2 --grad-accum "$m" \
      --pp-schedule "$schedule" "${extra[@]}" --metrics "$m_file" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    b=$(median "$m_file" pipeline_bubble) p=$(median "$m_file" pipeline_bubble_predicted) s=$(median "$m_file" step_s)
    echo "$schedule,$m,$b,$p,$s" >> "$csv"
    awk -v n="$schedule" -v m="$m" -v b="$b" -v p="$p" -v s="$s" \
      'BEGIN { printf "%-12s %4d %9.1f%% %9.1f%% %9.1f\n", n, m, 100 * b, 100 * p, 1e3 * s }'
  done
done
echo "wrote $csv"
