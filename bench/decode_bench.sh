#!/usr/bin/env bash
# decode_bench.sh: decode throughput against batch size on this machine, measured by
# `generate --prompts` beside the cost model's prediction on the calibrated local profile.
# The book's inference chapter: a decode step reads every weight once whatever the batch,
# so small batches are memory-bound (step time flat, tokens/s growing with B) until the
# weight matmuls' FLOPs catch up at the critical batch B* = FLOP/s / (bandwidth / bytes per
# weight * 2 FLOPs) (fp32 weights here: B* = 2 FLOP/s / bandwidth); past it tokens/s levels off.
# Model: GPT, V 256, T 256, D 768, L 6, N 12, F 3072 (42.5M weights, 170 MB in fp32: far
# past the caches); 16-token prompts, 32 new tokens per row, greedy.
# Usage: bench/decode_bench.sh [build-dir] [out.csv]   (BATCHES="1 2 4 ..." to choose; 1 rank,
#        THREADS threads, default 2; ROUNDS interleaved rounds, default 3, medians reported;
#        each run's prediction on the local profile measured just before it, or with
#        PROFILE=once on the one measured at the start).
#        Plot: python3 bench/plot_decode.py out.csv -o decode.png
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
csv=${2:-}
threads=${THREADS:-2}
batches=${BATCHES:-1 2 4 8 16 32 64}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The profile generate predicts with: measured afresh by the first run, here.
export OMP_NUM_THREADS=$threads SHARDLAB_LOCAL_PROFILE=$tmp/local.profile

model=(--model gpt-small --vocab 256 --context 256 --d-model 768 --layers 6 --heads 12 --d-ff 3072)
"$build/examples/train_gpt" "${model[@]}" --steps 1 --batch 1 --eval-every 0 --eval-batches 1 --eval-problems 0 \
  --threads "$threads" --ckpt-dir "$tmp" > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; exit 1; }
ckpt=$(ls "$tmp"/ckpt_*.h5 | tail -1)

"$build/examples/generate" --ckpt "$ckpt" --max-new 2 > /dev/null 2>&1
flops=$(awk -F' = ' '$1 == "flops_fp32" {print $2}' "$SHARDLAB_LOCAL_PROFILE")
bw=$(awk -F' = ' '$1 == "hbm_bandwidth" {print $2}' "$SHARDLAB_LOCAL_PROFILE")
awk -v f="$flops" -v b="$bw" 'BEGIN { printf "local profile: %.1f GFLOP/s fp32 GEMM, %.1f GB/s memory; critical batch B* = 2 x FLOP/s / bandwidth = %.1f\n", f / 1e9, b / 1e9, 2 * f / b }'

# ROUNDS rounds, each running every batch once (interleaved, so that the machine's drift
# hits every batch alike); each figure is the median over the rounds.
rounds=${ROUNDS:-3}
for ((r = 0; r < rounds; ++r)); do
  for B in $batches; do
    for ((i = 0; i < B; ++i)); do echo "Once upon a time"; done > "$tmp/prompts.txt"  # 16 tokens each
    # The prediction on a profile measured just before the run (this VM's bandwidth moves by
    # a third between minutes): generate calibrates afresh when it finds no profile.
    [ "${PROFILE:-each}" = once ] || rm -f "$SHARDLAB_LOCAL_PROFILE"
    "$build/examples/generate" --ckpt "$ckpt" --prompts "$tmp/prompts.txt" --max-new 32 > /dev/null 2> "$tmp/err"
    line=$(grep "^batch" "$tmp/err")
    sed -E 's/.*prefill [0-9]+ x [0-9]+ tokens: ([0-9.]+) ms.*decode [0-9]+ steps: ([0-9.]+) ms per step.*prefill ([0-9.]+) ms, decode ([0-9.]+) ms per step$/\1 \2 \3 \4/' <<< "$line" \
      >> "$tmp/batch_$B"
  done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "medians of $rounds interleaved rounds; prefill: B prompts of 16 tokens, cold (the first GEMM of each shape)"
printf "%6s %10s %10s %9s %12s %12s %12s %12s %9s\n" batch "prefill" "predicted" "meas/pred" "decode ms" "predicted" "tokens/s" "predicted" "meas/pred"
[ -n "$csv" ] && echo "batch,step_s,predicted_step_s,tokens_per_s,predicted_tokens_per_s,prefill_s,predicted_prefill_s" > "$csv"
for B in $batches; do
  pf=$(cut -d' ' -f1 "$tmp/batch_$B" | median); ms=$(cut -d' ' -f2 "$tmp/batch_$B" | median)
  ppf=$(cut -d' ' -f3 "$tmp/batch_$B" | median); pred=$(cut -d' ' -f4 "$tmp/batch_$B" | median)
  awk -v B="$B" -v pf="$pf" -v ppf="$ppf" -v ms="$ms" -v p="$pred" 'BEGIN {
    printf "%6d %10.2f %10.2f %9.2f %12.2f %12.2f %12.0f %12.0f %9.2f\n", B, pf, ppf, pf / ppf, ms, p, 1e3 * B / ms, 1e3 * B / p, ms / p }'
  [ -n "$csv" ] && awk -v B="$B" -v ms="$ms" -v p="$pred" -v pf="$pf" -v ppf="$ppf" \
    'BEGIN { printf "%d,%g,%g,%g,%g,%g,%g\n", B, ms / 1e3, p / 1e3, 1e3 * B / ms, 1e3 * B / p, pf / 1e3, ppf / 1e3 }' >> "$csv"
done
