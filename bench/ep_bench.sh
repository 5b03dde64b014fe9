#!/usr/bin/env bash
# ep_bench.sh: expert parallelism on llama-moe-small (LLaMA, V 256, T 128, D 128, L 4, N 4,
# K 2; 8 experts of F 172, top-2, capacity factor 1.25; AdamW), measured side by side on
# the same global batch (16 x 128 tokens):
#   1 rank x 2 threads | expert=2, 2 ranks x 1 thread (4 experts each, all_to_all dispatch
#   and combine) | data=2, 2 ranks x 1 thread (every expert on both ranks)
# with tokens/s and the expert axis's all_to_all time per step, measured beside the plan's
# prediction on the local links. Then the loss of the MoE model against llama-small, the
# dense model with the same active parameters per token (its F 344 = 2 experts of 172),
# on the default arithmetic task for the same steps: a table, and loss.png with
# matplotlib (launch/plot_loss.py).
# Usage: bench/ep_bench.sh [build-dir]     (STEPS=12, CURVE_STEPS=300 by default; needs mpirun)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/train_bench.sh "${1:-build}"  # train, steps, tmp, mpi, median, run, ratios
common=(--model llama-moe-small --batch 16 --steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 1000 --ckpt-dir "$tmp/ckpt")
echo "== llama-moe-small, global batch 16 x 128 tokens, AdamW; medians of $steps steps (the first two left out)"
run "1 rank x 2 threads" 1 2
run "expert=2, 2 ranks x 1" 2 1 --mesh expert=2
run "data=2, 2 ranks x 1" 2 1 --mesh data=2
ratios "1 rank x 2 threads" "expert=2, 2 ranks x 1" "data=2, 2 ranks x 1"

curve=${CURVE_STEPS:-300}
out=${OUT:-$tmp}
echo "== MoE against dense with the same active parameters: arithmetic, batch 16 x 64 tokens, $curve steps, 1 rank x 2 threads"
for model in llama-small llama-moe-small; do
  OMP_NUM_THREADS=2 "$train" --model "$model" --batch 16 --seq-len 64 --steps "$curve" --eval-every "$((curve / 3))" \
    --eval-batches 4 --eval-problems 0 --log-every 1000 --threads 2 --ckpt-dir "$tmp/ckpt" \
    --metrics "$out/$model.jsonl" > "$tmp/$model.log"
  grep '^model' "$tmp/$model.log"
done
printf "%-18s" "step"; for s in $((curve / 3)) $((2 * curve / 3)) "$curve"; do printf "%12s" "$s"; done; echo
for model in llama-small llama-moe-small; do
  printf "%-18s" "$model"
  for s in $((curve / 3)) $((2 * curve / 3)) "$curve"; do
    grep "\"step\": $s[,}]" "$out/$model.jsonl" | grep -o '"eval_loss": [^,}]*' | awk '{printf "%12.4f", $2}'
  done
  printf "   (held-out loss; %s tokens/s median)\n" "$(median "$out/$model.jsonl" tokens_per_s | awk '{printf "%.0f", $1}')"
done
/usr/bin/python3 launch/plot_loss.py "$out/llama-small.jsonl" "$out/llama-moe-small.jsonl" -o "${PLOT:-loss.png}" || true
