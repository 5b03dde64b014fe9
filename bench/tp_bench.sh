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

ms() { median "$1" "$2" | awk '{printf "%.1f", $1 * 1e3}'; }
run() {  # name ranks threads args...
  local name=$1 n=$2 threads=$3; shift 3
  OMP_NUM_THREADS=$threads "${mpi[@]}" -n "$n" "$train" "${common[@]}" --threads "$threads" \
    --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.log"
  local tensor="" 
  if grep -q tensor_comm_s "$tmp/$name.jsonl"; then
    tensor="   tensor comm $(ms "$tmp/$name.jsonl" tensor_comm_s) ms (predicted $(ms "$tmp/$name.jsonl" tensor_comm_predicted_s) ms)"
  fi
  printf "%-26s %9.0f tokens/s   step %7.1f ms%s\n" "$name" "$(median "$tmp/$name.jsonl" tokens_per_s)" \
    "$(ms "$tmp/$name.jsonl" step_s)" "$tensor"
}

echo "== gpt-bench, global batch 8 x 256 tokens, AdamW; medians of $steps steps (the first two left out)"
run "1 rank x 2 threads" 1 2
run "tensor=2, 2 ranks x 1" 2 1 --mesh tensor=2
run "tensor=2 + sequence par." 2 1 --mesh tensor=2 --sequence-parallel
run "tensor=2 + seq. + overlap" 2 1 --mesh tensor=2 --sequence-parallel --tp-overlap
run "data=2, 2 ranks x 1" 2 1 --mesh data=2
for name in "tensor=2, 2 ranks x 1" "tensor=2 + sequence par." "tensor=2 + seq. + overlap" "data=2, 2 ranks x 1"; do
  awk -v name="$name" -v a="$(median "$tmp/1 rank x 2 threads.jsonl" tokens_per_s)" \
      -v b="$(median "$tmp/$name.jsonl" tokens_per_s)" 'BEGIN { printf "%s / 1 rank x 2 threads: %.2fx tokens/s\n", name, b / a }'
done
