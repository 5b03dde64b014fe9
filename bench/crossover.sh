#!/usr/bin/env bash
# crossover.sh: the book's critical batch of a data-parallel layout (chapter 5), measured on
# this CPU: plain DP by default, FSDP with ZERO=3, an MoE model with MODEL_ARGS.
#
# A data-parallel step computes for F·t / C seconds (t tokens per rank, F FLOPs per token,
# C FLOP/s per rank) and moves its gradients (and under FSDP its parameters) in a time
# T_comm set by the links and the model size alone. Below t* = T_comm · C / F
# communication dominates; above it computation does, and overlapping the two can hide
# the communication completely: the book's "DP is compute-bound when B/X > C / W_ici".
# To bring t* within a CPU's reach, the links are emulated (--link-mode delay) as
# LINK_PROFILE's, slowed down LINK_SCALE times, which keeps the chip's ratio of FLOP/s to
# link bandwidth (tpu-v5e: 197 TFLOP/s over 45 GB/s; a CPU core does ~150 GFLOP/s,
# about 1300x less).
#
# For each per-rank batch (BATCHES sequences of 256 tokens) it runs the model on 2 ranks
# twice: --overlap=false (compute and communication back to back, each timed) and with
# overlap (what remains exposed: at least the last gradient bucket, which backward fills
# last and which therefore has nothing left to hide behind; BUCKET_MB sets its size;
# OVERLAP_RUNS=0 skips these). It prints the table, the measured crossover (where compute
# time meets communication time) next to the formula's, with T_comm the cost model's time
# for the layout's collectives on the emulated links (train_gpt's own prediction) and C/F
# as measured at the batch nearest the crossover, and writes $OUT/crossover.csv (and crossover.png with
# bench/plot_crossover.py, if matplotlib is there).
# Usage: bench/crossover.sh [build-dir]
#   (LINK_PROFILE=tpu-v5e LINK_SCALE=1300 BATCHES="1 2 4 8 16 32" STEPS=5 BUCKET_MB=1
#    ZERO=0 MODEL_ARGS="--model gpt-bench" OVERLAP_RUNS=1 TITLE="Data parallelism" OUT=runs/crossover
#    KEEP_LOG=file: keep the largest batch's train_gpt output there)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
profile=${LINK_PROFILE:-tpu-v5e}
scale=${LINK_SCALE:-1300}
batches=${BATCHES:-1 2 4 8 16 32}
steps=${STEPS:-5}
bucket=${BUCKET_MB:-1}
zero=${ZERO:-0}
model_args=${MODEL_ARGS:---model gpt-bench}
overlap_runs=${OVERLAP_RUNS:-1}
title=${TITLE:-Data parallelism}
out=${OUT:-runs/crossover}
ranks=2 seq=256
source bench/metrics.sh  # median FILE FIELD, bench_setup DIR
bench_setup "$out"

run() {  # name per-rank-sequences overlap
  # shellcheck disable=SC2086  # MODEL_ARGS is a list of flags
  mpirun --oversubscribe --bind-to none -n "$ranks" "$build/examples/train_gpt" $model_args --mesh data=$ranks --zero "$zero" \
    --batch $(($2 * ranks)) --steps "$steps" --warmup 1 --eval-every 0 --eval-problems 0 --log-every 1000 --threads 1 \
    --link-mode delay --link-profile "$profile" --link-scale "$scale" --overlap="$3" --bucket-mb "$bucket" \
    --ckpt-dir "$tmp/ckpt" --metrics "$tmp/$1.jsonl" > "$tmp/$1.log"
}

echo "$title: $model_args, data=$ranks ZeRO-$zero on $ranks ranks, links: $profile slowed ${scale}x (delay mode), ${bucket} MiB buckets, $steps steps per point, medians"
printf "%8s %10s %12s %14s %10s %22s\n" tokens/rank compute_ms comm_ms compute/comm step_ms "exposed w/ overlap ms"
echo "tokens_per_rank,compute_s,comm_s,step_overlap_s,exposed_overlap_s" > "$out/crossover.csv"
for b in $batches; do
  run "serial_$b" "$b" false
  step=$(median "$tmp/serial_$b.jsonl" step_s)
  comm=$(median "$tmp/serial_$b.jsonl" exposed_comm_s)
  ostep=nan oexp=nan
  if [ "$overlap_runs" = 1 ]; then
    run "overlap_$b" "$b" true
    ostep=$(median "$tmp/overlap_$b.jsonl" step_s)
    oexp=$(median "$tmp/overlap_$b.jsonl" exposed_comm_s)
  fi
  tokens=$((b * seq))
  compute=$(awk -v s="$step" -v c="$comm" 'BEGIN {print s - c}')
  echo "$tokens,$compute,$comm,$ostep,$oexp" >> "$out/crossover.csv"
  awk -v t="$tokens" -v c="$compute" -v a="$comm" -v s="$ostep" -v e="$oexp" \
    'BEGIN {printf "%8d %10.1f %12.1f %14.2f", t, c * 1e3, a * 1e3, c / a
            if (s == "nan") printf "%10s %22s\n", "-", "-"; else printf "%10.1f %22.1f\n", s * 1e3, e * 1e3}'
done

# The formula: T_comm, the cost model's time for this layout's collectives on the emulated
# links (train_gpt prints it: "communication X ms if not overlapped"); C and F as this run
# measured them: compute time per token at the batch nearest the crossover it gives (per
# token, compute is not quite constant: fixed costs weigh at small batches, and memory
# traffic at large ones).
last="$tmp/serial_${batches##* }.log"
flops=$(grep -o '[0-9.]* MFLOP per token' "$last" | awk '{print $1 * 1e6}')
t_ar=$(grep -o 'communication [0-9.]* ms if not overlapped' "$last" | awk '{print $2 / 1e3}')
if [ -n "${KEEP_LOG:-}" ]; then cp "$last" "$KEEP_LOG"; fi  # the largest batch's train_gpt output
awk -F, -v t_ar="$t_ar" -v flops="$flops" -v zero="$zero" '
  NR > 1 { n++; t[n] = $1; c[n] = $2; a[n] = $3 }
  END {
    best = -1
    for (i = 1; i <= n; i++) {  # per-token compute where compute is nearest T_comm: nearest the crossover
      d = log(c[i] / t_ar); d = d < 0 ? -d : d
      if (best < 0 || d < best) { best = d; per_token = c[i] / t[i]; at = t[i] }
    }
    formula = t_ar / per_token
    printf "\nformula: the cost model puts the collectives of a ZeRO-%d step at T_comm = %.1f ms on the emulated links;\n", zero, t_ar * 1e3
    printf "         compute is %.1f us per token at %d tokens (C = %.1f GFLOP/s per rank at %.2f MFLOP per token),\n", per_token * 1e6, at, flops / per_token / 1e9, flops / 1e6
    printf "         so compute-bound above t* = T_comm / (F / C) = %.0f tokens per rank\n", formula
    for (i = 1; i < n; i++) {
      r1 = log(c[i] / a[i]); r2 = log(c[i + 1] / a[i + 1])
      if (r1 <= 0 && r2 > 0) {
        cross = exp(log(t[i]) + (log(t[i + 1]) - log(t[i])) * (0 - r1) / (r2 - r1))
        printf "measured: compute time meets communication time at %.0f tokens per rank (%.2fx the formula)\n", cross, cross / formula
      }
    }
  }' "$out/crossover.csv"
py=$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)  # Debian's sees python3-matplotlib
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" bench/plot_crossover.py "$out/crossover.csv" --t-ar "$t_ar" --title "$title" -o "$out/crossover.png"
fi
