#!/usr/bin/env bash
# tp_degree.sh: the largest tensor-parallel degree before tensor communication is exposed
# (the book's chapter 5: TP of degree Y stays compute-bound while Y < F · W / C, i.e. while
# each rank keeps F/Y > C/W columns of the MLP).
#
# Tensor parallelism moves activations, not weights: every block all-reduces its
# attention and MLP outputs (forward and backward), B·T·D values each, while each rank
# computes 1/Y of the block's matmuls, in proportion to F/Y. The batch cancels, so the
# crossover is a width: compute meets communication at F*/Y, and a model of width F can be
# split at most Y_max = F / (F*/Y) ways before its tensor communication shows. This
# machine has two cores, so Y = 2 and the sweep is over F (gpt-bench's D = 256, L = 4,
# --d-ff FFS), with tpu-v5e's links emulated in delay mode, slowed LINK_SCALE times to
# keep v5e's ratio of FLOP/s to link bandwidth (as bench/crossover.sh). Tensor
# communication is never overlapped here (no --tp-overlap), so each step times compute
# and communication apart.
#
# Prints per F the measured compute and tensor communication (and the cost model's),
# their ratio, the largest degree that width allows, and the crossover F*/Y measured,
# from the cost model, and from the book's closed form (MLP only): F/Y > (b/2) · C / W
# with b bytes per activation (4, fp32) and W = 2 x one ICI link. Writes $OUT/tp_degree.csv.
# Usage: bench/experiments/tp_degree.sh [build-dir]
#   (FFS="2048 4096 8192 16384 32768" BATCH=8 STEPS=5 LINK_PROFILE=tpu-v5e LINK_SCALE=1300 OUT=runs/experiments)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
ffs=${FFS:-2048 4096 8192 16384 32768}
batch=${BATCH:-8}
steps=${STEPS:-5}
profile=${LINK_PROFILE:-tpu-v5e}
scale=${LINK_SCALE:-1300}
out=${OUT:-runs/experiments}
ranks=2 seq=256
source bench/metrics.sh  # median FILE FIELD, bench_setup DIR
bench_setup "$out"

tokens=$((batch * seq))
echo "gpt-bench (D=256, L=4) with tensor=$ranks on $ranks ranks, $tokens tokens per step, links: $profile slowed ${scale}x (delay mode), $steps steps per point, medians"
printf "%6s %6s %11s %9s %14s %13s %12s\n" F F/Y compute_ms comm_ms "comm pred ms" compute/comm "largest Y"
echo "d_ff,flops_per_token,compute_s,comm_s,comm_predicted_s" > "$out/tp_degree.csv"
for f in $ffs; do
  mpirun --oversubscribe --bind-to none -n "$ranks" "$build/examples/train_gpt" --model gpt-bench --d-ff "$f" \
    --mesh tensor=$ranks --batch "$batch" --steps "$steps" --warmup 1 --eval-every 0 --eval-problems 0 --log-every 1000 \
    --threads 1 --link-mode delay --link-profile "$profile" --link-scale "$scale" \
    --ckpt-dir "$tmp/ckpt" --metrics "$tmp/$f.jsonl" > "$tmp/$f.log"
  step=$(median "$tmp/$f.jsonl" step_s)
  comm=$(median "$tmp/$f.jsonl" tensor_comm_s)
  other=$(median "$tmp/$f.jsonl" exposed_comm_s)  # the data-axis remainder (gradient norm)
  pred=$(median "$tmp/$f.jsonl" tensor_comm_predicted_s)
  flops=$(grep -o '[0-9.]* MFLOP per token' "$tmp/$f.log" | awk '{print $1 * 1e6}')
  compute=$(awk -v s="$step" -v c="$comm" -v o="$other" 'BEGIN {print s - c - o}')
  echo "$f,$flops,$compute,$comm,$pred" >> "$out/tp_degree.csv"
  awk -v f="$f" -v y="$ranks" -v c="$compute" -v a="$comm" -v p="$pred" \
    'BEGIN {printf "%6d %6d %11.1f %9.1f %14.1f %13.2f %12.1f\n", f, f / y, c * 1e3, a * 1e3, p * 1e3, c / a, y * c / a}'
done

# The crossovers. Measured: where compute/comm crosses 1 between two widths (log-linear).
# Cost model: compute = FLOPs(F) · tokens / (Y · C) against the predicted communication,
# FLOPs(F) linear in F (through the two widest), C measured at the width whose compute
# is nearest the communication (per FLOP, compute is not constant: large F adds memory
# traffic for the F-wide activations).
# Book: (b/2) · C / W with the same C and the profile's all-gather bandwidth, slowed.
w=$("$build/examples/shardlab-plan" hw --hw "$profile" --json |
    awk -v s="$scale" '/"ici"/ {ici = 1} ici && /"bandwidth"/ {gsub(/[,]/, ""); print 2 * $2 / s; exit}')
awk -F, -v y="$ranks" -v tokens="$tokens" -v w="$w" '
  NR > 1 { n++; f[n] = $1; fl[n] = $2; c[n] = $3; a[n] = $4; p[n] = $5 }
  END {
    best = -1
    for (i = 1; i <= n; i++) {
      d = log(c[i] / p[i]); d = d < 0 ? -d : d
      if (best < 0 || d < best) { best = d; C = fl[i] * tokens / y / c[i]; at = f[i] }
    }
    slope = (fl[n] - fl[n - 1]) / (f[n] - f[n - 1]); base = fl[n] - slope * f[n]
    model = (p[n] * y * C / tokens - base) / slope
    book = 2 * C / w
    printf "\nC = %.1f GFLOP/s per rank (measured at F = %d); W = %.1f MB/s (2 x one emulated link)\n", C / 1e9, at, w / 1e6
    printf "cost model: compute meets its predicted communication at F/Y = %.0f\n", model / y
    printf "book, MLP only: F/Y > (b/2) C / W = %.0f with fp32 activations (b = 4)\n", book
    for (i = 1; i < n; i++) {
      r1 = log(c[i] / a[i]); r2 = log(c[i + 1] / a[i + 1])
      if (r1 <= 0 && r2 > 0) {
        cross = exp(log(f[i]) + (log(f[i + 1]) - log(f[i])) * (0 - r1) / (r2 - r1))
        printf "measured: compute meets tensor communication at F/Y = %.0f (%.2fx the cost model, %.2fx the book)\n", cross / y, cross / model, cross / y / book
        printf "so a model of width F stays compute-bound up to Y = F / %.0f ways (F = 16384: %.1f)\n", cross / y, 16384 / (cross / y)
      }
    }
  }' "$out/tp_degree.csv"
