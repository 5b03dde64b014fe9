#!/usr/bin/env bash
# moe_critical_batch.sh: the MoE critical batch grows with E/k (the book's chapter 5/6 note
# on mixtures of experts). Data parallelism must move every expert's gradients, E times a
# dense MLP's, while each token computes through only k experts: the per-rank batch that
# hides the gradient traffic grows by E/k for the MoE layers. In a whole model the dense
# parts (attention, embeddings) dilute it: t*(E, k) / t*(dense) = (T_comm(E) / T_comm(dense))
# x (F_dense / F(k)), the parameter ratio over the per-token FLOP ratio.
#
# Runs bench/crossover.sh (data=2, serial steps only) for gpt-bench dense and with
# --experts E --top-k k on every block, capacity factor 1 (each expert computes
# T·k/E slots per sequence, so a token costs k experts' FLOPs however the router splits
# them; dropless routing is left out because it pads every expert to the whole sequence),
# each over a batch sweep around its expected crossover, and prints one row per model:
# measured and formula crossover, and their growth over the dense model beside E/k.
# Writes $OUT/moe_critical_batch.csv and each model's crossover CSV under $OUT/moe/.
# Usage: bench/experiments/moe_critical_batch.sh [build-dir]
#   (CONFIGS="0:1:4,8,16 2:1:8,16,32 4:1:8,16,32 4:2:8,16,32" STEPS=5 OUT=runs/experiments)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
# E:k:per-rank batches in sequences (E = 0: the dense model)
configs=${CONFIGS:-0:1:4,8,16 2:1:8,16,32 4:1:8,16,32 4:2:8,16,32}
out=${OUT:-runs/experiments}
mkdir -p "$out/moe"

echo "E,k,params_m,mflop_per_token,t_comm_ms,formula_tokens,measured_tokens" > "$out/moe_critical_batch.csv"
for c in $configs; do
  IFS=: read -r e k batches <<< "$c"
  args="--model gpt-bench"
  [ "$e" -gt 0 ] && args+=" --experts $e --top-k $k --moe-every 1 --capacity-factor 1"
  name=$([ "$e" -gt 0 ] && echo "E${e}_k$k" || echo dense)
  log="$out/moe/$name.txt"
  BATCHES="${batches//,/ }" OVERLAP_RUNS=0 MODEL_ARGS="$args" TITLE="MoE E=$e k=$k" OUT="$out/moe/$name" \
    KEEP_LOG="$out/moe/$name.log" bash bench/crossover.sh "$build" > "$log"
  formula=$(grep -o 't\* = T_comm / (F / C) = [0-9]*' "$log" | awk '{print $NF}')
  measured=$(grep -o 'communication time at [0-9]*' "$log" | awk '{print $NF}' || true)  # none: outside the sweep
  tcomm=$(grep -o 'T_comm = [0-9.]*' "$log" | awk '{print $3}')
  params=$(grep -o '[0-9.]*M parameters' "$out/moe/$name.log" | head -1 | awk '{print $1 + 0}')
  mflop=$(grep -o '[0-9.]* MFLOP per token' "$out/moe/$name.log" | awk '{print $1}')
  echo "$e,$k,$params,$mflop,$tcomm,$formula,${measured:-nan}" >> "$out/moe_critical_batch.csv"
done

echo "gpt-bench on data=2, tpu-v5e links slowed 1300x (delay mode): the per-rank batch where compute meets"
echo "communication, as bench/crossover.sh measures it (each model's sweep: $out/moe/*.txt)"
awk -F, '
  NR == 2 { f0 = $6; m0 = $7 }
  NR > 1 {
    label = $1 == 0 ? "dense" : "E=" $1 " k=" $2
    rows[++n] = sprintf("%-10s %7.2f %8.2f %10.1f %10d %10s %9s %9s %6s", label, $3, $4, $5, $6,
                        $7 == "nan" ? "outside" : sprintf("%d", $7), sprintf("%.2fx", $6 / f0),
                        ($7 == "nan" || m0 == "nan") ? "-" : sprintf("%.2fx", $7 / m0), $1 == 0 ? "1" : $1 / $2)
  }
  END {
    printf "%-10s %7s %8s %10s %10s %10s %9s %9s %6s\n", "model", "params", "MFLOP/t", "T_comm ms", "t* formula",
           "t* meas.", "formula/d", "meas./d", "E/k"
    for (i = 1; i <= n; i++) print rows[i]
  }' "$out/moe_critical_batch.csv"
