#!/usr/bin/env bash
# Runs shardlab's bench_train_step and the PyTorch reference side by side, alternating,
# at 1 and 2 threads, and prints the tokens/s ratio of each pair (the machine is shared
# and noisy, so only ratios measured in one run are meaningful). Both report the best
# (minimum) step time; the summary takes the median ratio over the rounds.
#   bench/compare_torch.sh                  # build/ , 3 rounds
#   BUILD_DIR=build-perf ROUNDS=5 STEPS=10 bench/compare_torch.sh
# Both programs run under one OpenMP environment. OMP_WAIT_POLICY defaults to passive here:
# on a machine shared with other jobs, spinning at barriers while the partner thread is
# descheduled costs both programs 1.5-3x at 2 threads; OMP_WAIT_POLICY=active (or unset)
# measures the spinning behaviour instead.
# Needs: apt-get install python3-torch; bench_train_step built in $BUILD_DIR.
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$(dirname "$0")/.."
torch_script=${TORCH_BENCH:-bench/torch_gpt_bench.py}
build=${BUILD_DIR:-build}
rounds=${ROUNDS:-3}
steps=${STEPS:-8}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
field() { awk -v key="$1" -v col="$2" '$1 == key {print $col; exit}'; }
for threads in 1 2; do
  for round in $(seq "$rounds"); do
    ours_out=$(OMP_NUM_THREADS=$threads "$build/bench/bench_train_step" --threads "$threads" --steps "$steps")
    theirs_out=$(/usr/bin/python3 "$torch_script" --threads "$threads" --steps "$steps" --breakdown)
    ours=$(field best 5 <<<"$ours_out")
    theirs=$(field best 5 <<<"$theirs_out")
    echo "threads=$threads round=$round"
    grep -E '^(best|breakdown)' <<<"$ours_out" | sed 's/^/  shardlab /'
    grep -E '^(best|breakdown)' <<<"$theirs_out" | sed 's/^/  pytorch  /'
    awk -v t="$threads" -v a="$ours" -v b="$theirs" \
      'BEGIN {printf "  ratio %.2f  (shardlab %s / PyTorch %s tokens/s)\n", a / b, a, b; print t, a, b, a / b >> "/dev/stderr"}' 2>>"$log"
  done
done
echo "summary (median over $rounds rounds of the best-step tokens/s ratio; OMP_WAIT_POLICY=$OMP_WAIT_POLICY):"
sort -k1,1n -k4,4g "$log" | awk '{r[$1] = r[$1] " " $4; n[$1]++}
  END {for (t in r) {split(substr(r[t], 2), v, " "); printf "  threads=%s  shardlab/PyTorch %.2f  (ratios:%s)\n", t, v[int((n[t] + 1) / 2)], r[t]}}'
