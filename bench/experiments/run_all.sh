#!/usr/bin/env bash
# run_all.sh: runs the book's experiments that shardlab reproduces on this machine, one
# after another (never two benchmarks at once), and regenerates docs/experiments.md's
# tables and plots from their CSVs:
#   the data-parallel and FSDP critical batches (bench/crossover.sh, tpu-v5e links
#   emulated in delay mode), the largest tensor-parallel degree (tp_degree.sh), the
#   FSDP x TP optimum (fsdp_tp.sh), the MoE critical batch against E/k
#   (moe_critical_batch.sh), the pipeline bubble against microbatches for each schedule
#   (pipeline_bubble.sh), decode throughput against batch (bench/decode_bench.sh).
# About 25 minutes on 2 cores. Plots need matplotlib (/usr/bin/python3 with
# python3-matplotlib); without it the tables are still written.
# Usage: bench/experiments/run_all.sh [build-dir]   (OUT=runs/experiments)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
export OUT=${OUT:-runs/experiments}
mkdir -p "$OUT"
py=/usr/bin/python3
plots=1
$py -c "import matplotlib" 2> /dev/null || { plots=0; echo "run_all: no matplotlib in $py: tables only"; }

echo "== data-parallel crossover (bench/crossover.sh)"
OUT=$OUT/dp bash bench/crossover.sh "$build" | tee "$OUT/dp_crossover.txt"
echo "== FSDP crossover (bench/crossover.sh, ZeRO-3)"
ZERO=3 TITLE=FSDP OUT=$OUT/fsdp bash bench/crossover.sh "$build" | tee "$OUT/fsdp_crossover.txt"
echo "== largest tensor-parallel degree"
bash bench/experiments/tp_degree.sh "$build" | tee "$OUT/tp_degree.txt"
echo "== FSDP x TP optimum"
bash bench/experiments/fsdp_tp.sh "$build" | tee "$OUT/fsdp_tp.txt"
echo "== MoE critical batch against E/k"
bash bench/experiments/moe_critical_batch.sh "$build" | tee "$OUT/moe_critical_batch.txt"
echo "== pipeline bubble against microbatches"
bash bench/experiments/pipeline_bubble.sh "$build" | tee "$OUT/pipeline_bubble.txt"
echo "== decode throughput against batch"
bash bench/decode_bench.sh "$build" "$OUT/decode.csv" | tee "$OUT/decode.txt"

if [ "$plots" = 1 ]; then
  $py bench/experiments/plot.py pipeline_bubble "$OUT/pipeline_bubble.csv" -o docs/experiments_pipeline_bubble.png
  $py bench/plot_decode.py "$OUT/decode.csv" -o docs/decode_batch.png
  [ -f "$OUT/dp/crossover.png" ] && cp "$OUT/dp/crossover.png" docs/experiments_dp_crossover.png
  [ -f "$OUT/fsdp/crossover.png" ] && cp "$OUT/fsdp/crossover.png" docs/experiments_fsdp_crossover.png
  for e in tp_degree fsdp_tp moe_critical_batch; do
    $py bench/experiments/plot.py "$e" "$OUT/$e.csv" -o "docs/experiments_$e.png"
  done
fi
$py bench/experiments/report.py "$OUT" docs/experiments.md
