#!/usr/bin/env bash
# fsdp_tp.sh: the FSDP x TP optimum (the book's chapter 5). With X-way FSDP and Y-way TP on
# N = X·Y chips, FSDP moves the weights (each rank gathers and reduces its 1/Y of them,
# about D·F/Y per layer) and TP the activations (B/X tokens of width D), so
#   T_comm ∝ D·F / Y + B·D / X,  smallest at X_opt = sqrt(B · N / F)   (B in tokens).
# The two ends, X = N (pure FSDP: D·F + B·D/N) and Y = N (pure TP: D·F/N + B·D), cost the
# same at B* = F for any N: FSDP wins once the global batch exceeds F tokens, so the
# crossover moves with the width F. On two ranks those ends are the whole mesh, fsdp=2 or
# tensor=2. On more ranks the same script's layouts become the 2D ones (RANKS=4:
# fsdp=4, fsdp=2 x tensor=2, tensor=4), where the optimum sits inside the mesh.
#
# For each width in FFS and each global batch in BATCHES (sequences of 256 tokens) it runs
# every layout with all communication exposed (--overlap=false; TP is never overlapped
# here), links emulated as LINK_PROFILE's slowed LINK_SCALE times (delay mode), and
# prints each layout's median step, compute and communication, the cost model's
# predicted step, and which layout is faster, measured and predicted. Then, per width, the
# batch where FSDP overtakes TP, measured against the book's B* = F (N = 2) and the cost
# model's own crossover. With OVERLAP=1 FSDP also runs with overlap (what a user gets).
# Writes $OUT/fsdp_tp.csv.
# Usage: bench/experiments/fsdp_tp.sh [build-dir]
#   (FFS="1024 2048" BATCHES="2 4 8 16" RANKS=2 STEPS=5 LINK_PROFILE=tpu-v5e LINK_SCALE=1300 OUT=runs/experiments)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
ffs=${FFS:-1024 2048}
batches=${BATCHES:-2 4 8 16}
ranks=${RANKS:-2}
steps=${STEPS:-5}
profile=${LINK_PROFILE:-tpu-v5e}
scale=${LINK_SCALE:-1300}
out=${OUT:-runs/experiments}
seq=256
source bench/metrics.sh  # median FILE FIELD, bench_setup DIR
bench_setup "$out"

# The layouts X x Y = RANKS, FSDP outermost (mesh data=X --zero 3, tensor=Y).
layouts=""
for ((y = 1; y <= ranks; y *= 2)); do layouts+=" $((ranks / y))x$y"; done
mesh_of() { local x=${1%x*} y=${1#*x}; echo "data=$x,tensor=$y"; }

echo "gpt-bench (D=256, L=4) on $ranks ranks, layouts fsdp x tensor:$layouts, links: $profile slowed ${scale}x (delay mode), all communication exposed, $steps steps per point, medians"
printf "%6s %8s %8s %10s %11s %9s %10s\n" F tokens layout step_ms compute_ms comm_ms "pred ms"
echo "d_ff,tokens,fsdp,tensor,step_s,compute_s,comm_s,step_predicted_s" > "$out/fsdp_tp.csv"
for f in $ffs; do
  for b in $batches; do
    for l in $layouts; do
      name="${f}_${b}_$l"
      mpirun --oversubscribe --bind-to none -n "$ranks" "$build/examples/train_gpt" --model gpt-bench --d-ff "$f" \
        --mesh "$(mesh_of "$l")" --zero 3 --overlap=false --batch "$b" --steps "$steps" --warmup 1 --eval-every 0 \
        --eval-problems 0 --log-every 1000 --threads 1 --link-mode delay --link-profile "$profile" --link-scale "$scale" \
        --ckpt-dir "$tmp/ckpt" --metrics "$tmp/$name.jsonl" > "$tmp/$name.log"
      step=$(median "$tmp/$name.jsonl" step_s)
      exposed=$(median "$tmp/$name.jsonl" exposed_comm_s)
      tensor=$(grep -q tensor_comm_s "$tmp/$name.jsonl" && median "$tmp/$name.jsonl" tensor_comm_s || echo 0)
      pred=$(median "$tmp/$name.jsonl" step_predicted_s)
      comm=$(awk -v e="$exposed" -v t="$tensor" 'BEGIN {print e + t}')
      compute=$(awk -v s="$step" -v c="$comm" 'BEGIN {print s - c}')
      echo "$f,$((b * seq)),${l%x*},${l#*x},$step,$compute,$comm,$pred" >> "$out/fsdp_tp.csv"
      awk -v f="$f" -v t="$((b * seq))" -v l="$l" -v s="$step" -v c="$compute" -v a="$comm" -v p="$pred" \
        'BEGIN {printf "%6d %8d %8s %10.1f %11.1f %9.1f %10.1f\n", f, t, l, s * 1e3, c * 1e3, a * 1e3, p * 1e3}'
    done
  done
done

# Per width and batch: the fastest layout, measured and predicted; per width, where the
# fully-sharded end (X = RANKS) overtakes the tensor-parallel end (Y = RANKS), measured
# (log-linear between batches) beside the book's B* and the cost model's.
awk -F, -v n="$ranks" '
  NR > 1 { key = $1 SUBSEP $2; if (!(key in best) || $5 < best[key]) { best[key] = $5; bl[key] = $3 "x" $4 }
           if (!(key in bestp) || $8 < bestp[key]) { bestp[key] = $8; bpl[key] = $3 "x" $4 }
           if (!($1 in seen)) { seen[$1] = 1; fs[++nf] = $1 }
           if (!(key in seent)) { seent[key] = 1; nt[$1]++; tok[$1, nt[$1]] = $2 }
           if ($3 == n) { fsdp[key] = $5; fsdpp[key] = $8 }
           if ($4 == n) { tp[key] = $5; tpp[key] = $8 } }
  function crossing(f, m, p,    i, k1, k2, r1, r2) {
    for (i = 1; i < nt[f]; i++) {
      k1 = f SUBSEP tok[f, i]; k2 = f SUBSEP tok[f, i + 1]
      r1 = p ? log(tpp[k1] / fsdpp[k1]) : log(tp[k1] / fsdp[k1])
      r2 = p ? log(tpp[k2] / fsdpp[k2]) : log(tp[k2] / fsdp[k2])
      if (r1 <= 0 && r2 > 0) return exp(log(tok[f, i]) + (log(tok[f, i + 1]) - log(tok[f, i])) * (0 - r1) / (r2 - r1))
    }
    return -1
  }
  END {
    printf "\n%6s %8s %14s %15s %8s\n", "F", "tokens", "fastest", "predicted", "X_opt"
    for (i = 1; i <= nf; i++) for (j = 1; j <= nt[fs[i]]; j++) {
      key = fs[i] SUBSEP tok[fs[i], j]
      printf "%6d %8d %14s %15s %8.2f\n", fs[i], tok[fs[i], j], bl[key], bpl[key], sqrt(tok[fs[i], j] * n / fs[i])
    }
    printf "\nwhere fsdp=%d overtakes tensor=%d (global batch in tokens):\n", n, n
    for (i = 1; i <= nf; i++) {
      f = fs[i]; m = crossing(f, "", 0); p = crossing(f, "", 1); book = f
      printf "  F = %5d: book B* = F = %5d", f, book
      printf (p > 0 ? ", cost model %5.0f" : ", cost model outside the sweep"), p
      if (m > 0) printf ", measured %5.0f (%.2fx the book)\n", m, m / book; else printf ", measured outside the sweep\n"
    }
  }' "$out/fsdp_tp.csv"
