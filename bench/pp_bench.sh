#!/usr/bin/env bash
# pp_bench.sh: pipeline parallelism on the reference model (gpt-bench: V 256, T 256, D 256,
# L 4, N 4, F 1024; AdamW), measured side by side on the same global batch (8 x 256 tokens):
#   1 rank x 2 threads | pipe=2, 2 ranks x 1 thread, with each schedule (gpipe, 1f1b,
#   interleaved with 2 virtual stages, zero-bubble) over 8 microbatches, and 1f1b over 4 |
#   data=2, 2 ranks x 1 thread
# with tokens/s and the pipeline's bubble per step -- measured (idle fraction of the
# schedule's time, mean over the pipe ranks) beside the schedule's prediction.
# Usage: bench/pp_bench.sh [build-dir]     (STEPS=12 by default; needs mpirun)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/train_bench.sh "${1:-build}"  # train, steps, tmp, mpi, median, run, ratios
common=(--model gpt-bench --batch 8 --steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 1000 --ckpt-dir "$tmp/ckpt")

names=("pipe=2 gpipe, m=8" "pipe=2 1f1b, m=8" "pipe=2 1f1b, m=4" "pipe=2 interleaved v=2, m=8"
       "pipe=2 zero-bubble, m=8" "data=2, 2 ranks x 1")
echo "== gpt-bench, global batch 8 x 256 tokens, AdamW; medians of $steps steps (the first two left out)"
run "1 rank x 2 threads" 1 2
run "${names[0]}" 2 1 --mesh pipe=2 --grad-accum 8 --pp-schedule gpipe
run "${names[1]}" 2 1 --mesh pipe=2 --grad-accum 8 --pp-schedule 1f1b
run "${names[2]}" 2 1 --mesh pipe=2 --grad-accum 4 --pp-schedule 1f1b
run "${names[3]}" 2 1 --mesh pipe=2 --grad-accum 8 --pp-schedule interleaved --pp-virtual 2
run "${names[4]}" 2 1 --mesh pipe=2 --grad-accum 8 --pp-schedule zero-bubble
run "${names[5]}" 2 1 --mesh data=2
ratios "1 rank x 2 threads" "${names[@]}"

# The bubble against microbatches (1F1B, global batch 16 x 256): p = 2, and p = 4 with its
# four ranks sharing this machine's two cores (timings then mix the bubble with the
# ranks' contention for a core; the idle fraction is still each rank's own).
echo "== the bubble against microbatches, 1f1b, global batch 16 x 256 tokens"
common=(--model gpt-bench --batch 16 --steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 1000 --ckpt-dir "$tmp/ckpt")
for p in 2 4; do
  for m in 4 8 16; do
    run "pipe=$p, m=$m" "$p" 1 --mesh pipe=$p --grad-accum "$m" --pp-schedule 1f1b
  done
done
