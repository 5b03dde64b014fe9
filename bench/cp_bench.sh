#!/usr/bin/env bash
# cp_bench.sh: context parallelism on a long sequence, measured side by side on the same
# global batch (LLaMA, V 256, T 4096, D 128, L 2, N 4, K 2; 2 x 4096 tokens, AdamW):
#   1 rank x 2 threads | context=2, ring, head-tail balanced | context=2, ring, contiguous
#   chunks | context=2, all-gather | data=2 (each rank one whole sequence)
# each 2 ranks x 1 thread: tokens/s, step time, the peak activation memory of rank 0, and
# each context rank's attention time per step (slowest and fastest: the imbalance the
# head-tail balance removes) with the ring's exposed wait. Then the ring again with the
# links of a TPU v5p emulated in delay mode and slowed by the compute ratio of this CPU to
# the chip (--link-scale, docs/collectives.md): how much of the ring the attention hides,
# at T 4096 and at LONG_SEQ (default 16384, one sequence, 4 steps), where each ring step's
# attention FLOPs per K/V byte exceed the chip's FLOPs per link byte (docs/context_parallel.md).
# Usage: bench/cp_bench.sh [build-dir]     (STEPS=6 by default; needs mpirun)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-6}
source bench/train_bench.sh "${1:-build}"  # train, steps, tmp, mpi, median, run, ratios
seq=${SEQ:-4096}
common=(--model llama-tiny --context "$seq" --d-model 128 --layers 2 --heads 4 --kv-heads 2 --d-ff 344 --batch 2
        --steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0 --log-every 1000
        --ckpt-dir "$tmp/ckpt")
# activations NAME: rank 0's activation bytes at their peak in step 1 (the memory tracker's).
activations() { grep -m1 '^memory per rank (peak during step 1)' "$tmp/$1.log" | sed 's/.*activations \([^|]*\) |.*/\1/'; }
# attention NAME: the context axis's line (train_gpt's report), shortened.
attention() { grep -m1 '^context attention' "$tmp/$1.log" | sed 's/^context attention per step on the context axis: //'; }
echo "== LLaMA T $seq, D 128, L 2, N 4, K 2; global batch 2 x $seq tokens, AdamW; medians of $steps steps (the first two left out)"
run "1 rank x 2 threads" 1 2
run "context=2 ring balanced" 2 1 --mesh context=2 --cp-comm ring
run "context=2 ring contiguous" 2 1 --mesh context=2 --cp-comm ring --cp-load-balance=false
run "context=2 allgather" 2 1 --mesh context=2 --cp-comm allgather
run "data=2" 2 1 --mesh data=2
ratios "1 rank x 2 threads" "context=2 ring balanced" "context=2 allgather" "data=2"
echo "== peak activation memory of rank 0 during step 1"
for name in "1 rank x 2 threads" "context=2 ring balanced" "context=2 allgather" "data=2"; do
  printf "%-30s %s\n" "$name" "$(activations "$name")"
done
echo "== attention per context rank and step"
for name in "context=2 ring balanced" "context=2 ring contiguous" "context=2 allgather"; do
  printf "%-30s %s\n" "$name" "$(attention "$name")"
done
local_gflops=$("$build/examples/shardlab-plan" hw | awk '$1 == "local" { print $3 }')
scale=$(awk -v local="$local_gflops" 'BEGIN { printf "%.0f", 459e3 / local }')  # tpu-v5p's 459 TFLOP/s over this CPU's
echo "== the ring on emulated tpu-v5p links (delay mode, --link-scale $scale)"
v5p=(--mesh context=2 --cp-comm ring --link-profile tpu-v5p --link-mode delay --link-scale "$scale")
run "T $seq, v5p links" 2 1 "${v5p[@]}"
long=${LONG_SEQ:-16384}
common=(--model llama-tiny --context "$long" --d-model 128 --layers 2 --heads 4 --kv-heads 2 --d-ff 344 --batch 1
        --steps 4 --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0 --log-every 1000 --ckpt-dir "$tmp/ckpt")
run "T $long, v5p links" 2 1 "${v5p[@]}"
for name in "T $seq, v5p links" "T $long, v5p links"; do printf "%-30s %s\n" "$name" "$(attention "$name")"; done
