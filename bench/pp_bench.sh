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
build=${1:-build}
train=$build/examples/train_gpt
steps=${STEPS:-12}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --bind-to none)
common=(--model gpt-bench --batch 8 --steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 1000 --ckpt-dir "$tmp/ckpt")

source bench/metrics.sh  # median FILE FIELD

pct() { median "$1" "$2" | awk '{printf "%.1f", $1 * 100}'; }
run() {  # name ranks threads args...
  local name=$1 n=$2 threads=$3; shift 3
  OMP_NUM_THREADS=$threads "${mpi[@]}" -n "$n" "$train" "${common[@]}" --threads "$threads" \
    --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.log"
  local bubble=""
  if grep -q pipeline_bubble "$tmp/$name.jsonl"; then
    bubble="   bubble $(pct "$tmp/$name.jsonl" pipeline_bubble)% (predicted $(pct "$tmp/$name.jsonl" pipeline_bubble_predicted)%)"
  fi
  printf "%-30s %9.0f tokens/s   step %7.1f ms%s\n" "$name" "$(median "$tmp/$name.jsonl" tokens_per_s)" \
    "$(median "$tmp/$name.jsonl" step_s | awk '{printf "%.1f", $1 * 1e3}')" "$bubble"
}

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
for name in "${names[@]}"; do
  awk -v name="$name" -v a="$(median "$tmp/1 rank x 2 threads.jsonl" tokens_per_s)" \
      -v b="$(median "$tmp/$name.jsonl" tokens_per_s)" 'BEGIN { printf "%s / 1 rank x 2 threads: %.2fx tokens/s\n", name, b / a }'
done
