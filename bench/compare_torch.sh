#!/usr/bin/env bash
# Runs shardlab's bench_train_step and the PyTorch reference side by side, alternating,
# at 1 and 2 threads, and prints the tokens/s ratio of each pair (the machine is shared
# and noisy, so only ratios measured in one run are meaningful).
# Needs: apt-get install python3-torch libopenblas0-openmp; a build in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
torch_script=${TORCH_BENCH:-../shared/bench/torch_gpt_bench.py}
rounds=${ROUNDS:-2}
for threads in 1 2; do
  for round in $(seq "$rounds"); do
    ours=$(OMP_NUM_THREADS=$threads build/bench/bench_train_step --threads "$threads" --steps 8 | tee /dev/stderr | awk '/^best/ {print $5}')
    theirs=$(/usr/bin/python3 "$torch_script" --threads "$threads" --steps 8 --breakdown | tee /dev/stderr | awk '/^best/ {print $5}')
    echo "threads=$threads round=$round: shardlab $ours tokens/s, PyTorch $theirs tokens/s, ratio $(echo "scale=2; $ours / $theirs" | bc)"
  done
done
