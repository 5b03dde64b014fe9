#!/usr/bin/env bash
# tp_bench.sh: tensor parallelism on the reference model (gpt-bench: V 256, T 256, D 256,
# L 4, N 4, F 1024; AdamW), measured side by side on the same global batch (8 x 256 tokens):
#   1 rank x 2 threads | tensor=2, 2 ranks x 1 thread (also with --sequence-parallel, and with
#   --tp-overlap) | data=2, 2 ranks x 1 thread
# with tokens/s, the tensor axis's communication per step (all of it exposed: it blocks
# inside forward and backward) and its prediction from the step plan on the mesh's links.
# Usage: bench/tp_bench.sh [build-dir]     (STEPS=12 by default; needs mpirun)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/train_bench.sh "${1:-build}"  # train, steps, tmp, mpi, median, run, ratios
common=(--model gpt-bench --batch 8 --steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 1000 --ckpt-dir "$tmp/ckpt")

echo "== gpt-bench, global batch 8 x 256 tokens, AdamW; medians of $steps steps (the first two left out)"
run "1 rank x 2 threads" 1 2
run "tensor=2, 2 ranks x 1" 2 1 --mesh tensor=2
run "tensor=2 + sequence par." 2 1 --mesh tensor=2 --sequence-parallel
run "tensor=2 + seq. + overlap" 2 1 --mesh tensor=2 --sequence-parallel --tp-overlap
run "data=2, 2 ranks x 1" 2 1 --mesh data=2
ratios "1 rank x 2 threads" "tensor=2, 2 ranks x 1" "tensor=2 + sequence par." "tensor=2 + seq. + overlap" \
  "data=2, 2 ranks x 1"
