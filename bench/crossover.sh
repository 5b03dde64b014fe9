#!/usr/bin/env bash
# crossover.sh: the book's data-parallel crossover (chapter 5), measured on this CPU.
#
# A DP step computes for F·t / C seconds (t tokens per rank, F FLOPs per token, C FLOP/s
# per rank) and all-reduces the gradients in a time T_ar set by the links alone. Below
# t* = T_ar · C / F the all-reduce dominates; above it computation does, and overlapping
# the all-reduce with backward can hide it completely: the book's "DP is compute-bound
# when B/X > C / W_ici". To bring t* within a CPU's reach, the links are emulated
# (--link-mode delay) as LINK_PROFILE's, slowed down LINK_SCALE times, which keeps the
# chip's ratio of FLOP/s to link bandwidth (tpu-v5e: 197 TFLOP/s over 45 GB/s; a CPU
# core does ~150 GFLOP/s, about 1300x less).
#
# For each per-rank batch (BATCHES sequences of 256 tokens) it runs gpt-bench on 2 ranks
# twice: --overlap=false (compute and all-reduce back to back, each timed) and with
# overlap (what remains exposed: at least the last gradient bucket, which backward fills
# last and which therefore has nothing left to hide behind; BUCKET_MB sets its size). It prints the table, the measured crossover (where
# compute time meets all-reduce time) next to the formula's, and writes
# $OUT/crossover.csv (and crossover.png with bench/plot_crossover.py, if matplotlib is there).
# Usage: bench/crossover.sh [build-dir]
#   (LINK_PROFILE=tpu-v5e LINK_SCALE=1300 BATCHES="1 2 4 8 16 32" STEPS=5 BUCKET_MB=1 OUT=runs/crossover)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
profile=${LINK_PROFILE:-tpu-v5e}
scale=${LINK_SCALE:-1300}
batches=${BATCHES:-1 2 4 8 16 32}
steps=${STEPS:-5}
bucket=${BUCKET_MB:-1}
out=${OUT:-runs/crossover}
ranks=2 seq=256
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

source bench/metrics.sh  # median FILE FIELD

run() {  # name per-rank-sequences overlap
  mpirun --oversubscribe --bind-to none -n "$ranks" "$build/examples/train_gpt" --model gpt-bench --mesh data=$ranks \
    --batch $(($2 * ranks)) --steps "$steps" --warmup 1 --eval-every 0 --eval-problems 0 --log-every 1000 --threads 1 \
    --link-mode delay --link-profile "$profile" --link-scale "$scale" --overlap="$3" --bucket-mb "$bucket" \
    --ckpt-dir "$tmp/ckpt" --metrics "$tmp/$1.jsonl" > "$tmp/$1.log"
}

echo "gpt-bench on $ranks ranks, links: $profile slowed ${scale}x (delay mode), ${bucket} MiB buckets, $steps steps per point, medians"
printf "%8s %10s %12s %14s %10s %22s\n" tokens/rank compute_ms allreduce_ms compute/comm step_ms "exposed w/ overlap ms"
echo "tokens_per_rank,compute_s,allreduce_s,step_overlap_s,exposed_overlap_s" > "$out/crossover.csv"
for b in $batches; do
  run "serial_$b" "$b" false
  run "overlap_$b" "$b" true
  step=$(median "$tmp/serial_$b.jsonl" step_s)
  comm=$(median "$tmp/serial_$b.jsonl" exposed_comm_s)
  ostep=$(median "$tmp/overlap_$b.jsonl" step_s)
  oexp=$(median "$tmp/overlap_$b.jsonl" exposed_comm_s)
  tokens=$((b * seq))
  compute=$(awk -v s="$step" -v c="$comm" 'BEGIN {print s - c}')
  echo "$tokens,$compute,$comm,$ostep,$oexp" >> "$out/crossover.csv"
  awk -v t="$tokens" -v c="$compute" -v a="$comm" -v s="$ostep" -v e="$oexp" \
    'BEGIN {printf "%8d %10.1f %12.1f %14.2f %10.1f %22.1f\n", t, c * 1e3, a * 1e3, c / a, s * 1e3, e * 1e3}'
done

# The formula: T_ar from the cost model for the gradient bytes on the emulated links, C
# and F as this run measured them (compute time per token at the largest batch).
flops=$(grep -o '[0-9.]* MFLOP per token' "$tmp/serial_${batches##* }.log" | awk '{print $1 * 1e6}')
params=$(grep -o '[0-9.]*M parameters' "$tmp/serial_${batches##* }.log" | head -1 | awk '{print $1}')
bytes=$(awk -v p="$params" 'BEGIN {printf "%d", p * 1e6 * 4}')
t_ar=$("$build/examples/shardlab-plan" collective --hw "$profile" --op all_reduce --bytes "$bytes" --mesh "$ranks" --json |
       grep -o '"seconds": [^,]*' | awk -v s="$scale" '{print $2 * s}')
awk -F, -v t_ar="$t_ar" -v flops="$flops" -v bytes="$bytes" '
  NR > 1 { n++; t[n] = $1; c[n] = $2; a[n] = $3 }
  END {
    per_token = c[n] / t[n]  # seconds of compute per token, largest batch
    formula = t_ar / per_token
    printf "\nformula: all-reduce of %.1f MB of fp32 gradients takes T_ar = %.1f ms on the emulated links;\n", bytes / 1e6, t_ar * 1e3
    printf "         compute is %.1f us per token (C = %.1f GFLOP/s per rank at %.2f MFLOP per token),\n", per_token * 1e6, flops / per_token / 1e9, flops / 1e6
    printf "         so compute-bound above t* = T_ar / (F / C) = %.0f tokens per rank\n", formula
    for (i = 1; i < n; i++) {
      r1 = log(c[i] / a[i]); r2 = log(c[i + 1] / a[i + 1])
      if (r1 <= 0 && r2 > 0) {
        cross = exp(log(t[i]) + (log(t[i + 1]) - log(t[i])) * (0 - r1) / (r2 - r1))
        printf "measured: compute time meets all-reduce time at %.0f tokens per rank (%.2fx the formula)\n", cross, cross / formula
      }
    }
  }' "$out/crossover.csv"
py=$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)  # Debian's sees python3-matplotlib
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" bench/plot_crossover.py "$out/crossover.csv" --t-ar "$t_ar" -o "$out/crossover.png"
fi
