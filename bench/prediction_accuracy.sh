#!/usr/bin/env bash
# prediction_accuracy.sh: how close train_gpt's own prediction of a step comes to the
# measured step, over every strategy alone and combined, with and without link emulation.
#
# Each layout runs STEPS steps of a small model (gpt-bench, or its MoE variant for the
# expert layouts) twice: on this machine's own links (--link-mode off; the prediction
# prices them with the calibrated local profile) and on tpu-v5e's links slowed
# LINK_SCALE times (--link-mode delay). From each run's JSONL it takes the medians (from
# the third step) of the measured and predicted step, compute, the data axes' exposed
# communication and each model axis's communication, and prints the error of each,
# measured / predicted - 1. Components whose predicted time is under MIN_MS are left out
# of the statistics (a relative error of a few microseconds says nothing). Then, per
# component and overall, the median and 90th percentile of |error|: the table
# docs/prediction.md shows. Last, the single process REPEATS times more: how much the
# same run's measured step and its prediction move from run to run on this machine, the
# floor under the error. Writes $OUT/prediction_accuracy.csv and $OUT/repeatability.csv.
# Usage: bench/prediction_accuracy.sh [build-dir]
#   (STEPS=8 BATCH=8 LINK_SCALE=300 MIN_MS=5 REPEATS=6 OUT=runs/prediction)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${STEPS:-8}
batch=${BATCH:-8}
scale=${LINK_SCALE:-300}
min_ms=${MIN_MS:-5}
repeats=${REPEATS:-6}
out=${OUT:-runs/prediction}
source bench/metrics.sh  # median FILE FIELD, bench_setup DIR
bench_setup "$out"

moe="--experts 4 --top-k 2 --moe-every 1"
# name|ranks|flags: each strategy alone, then combined (every layout on 2 ranks but the
# single process and the 4-rank combinations, which share the 2 cores).
layouts=(
  "single|1|--mesh data=1"
  "dp|2|--mesh data=2"
  "zero2|2|--mesh data=2 --zero 2"
  "fsdp|2|--mesh data=2 --zero 3"
  "tp|2|--mesh tensor=2"
  "tp_sp|2|--mesh tensor=2 --sequence-parallel"
  "pp_1f1b|2|--mesh pipe=2 --grad-accum 4"
  "pp_zb|2|--mesh pipe=2 --grad-accum 4 --pp-schedule zero-bubble"
  "ep|2|--mesh expert=2 $moe"
  "dp_moe|2|--mesh data=2 $moe"
  "dp_tp|4|--mesh data=2,tensor=2"
  "zero1_pp|4|--mesh data=2,pipe=2 --zero 1 --grad-accum 2"
)

field() { grep -q "\"$2\"" "$1" && median "$1" "$2" || echo nan; }
# train RANKS MODE FLAGS...: one run of gpt-bench, its metrics in $tmp/run.jsonl.
train() {
  local ranks=$1 mode=$2
  shift 2
  rm -f "$tmp/run.jsonl"
  mpirun --oversubscribe --bind-to none -n "$ranks" "$build/examples/train_gpt" --model gpt-bench "$@" \
    --batch "$batch" --steps "$steps" --warmup 1 --eval-every 0 --eval-problems 0 --log-every 1000 --threads 1 \
    --link-mode "$mode" --link-profile "$([ "$mode" = off ] && echo local || echo tpu-v5e)" \
    --link-scale "$([ "$mode" = off ] && echo 1 || echo "$scale")" \
    --ckpt-dir "$tmp/ckpt" --metrics "$tmp/run.jsonl" > "$tmp/run.log"
}

echo "layout,links,ranks,component,measured_s,predicted_s" > "$out/prediction_accuracy.csv"
for entry in "${layouts[@]}"; do
  IFS='|' read -r name ranks flags <<< "$entry"
  for mode in off delay; do
    # shellcheck disable=SC2086  # flags is a list
    train "$ranks" "$mode" $flags
    j="$tmp/run.jsonl"
    {
      echo "$name,$mode,$ranks,step,$(field "$j" step_s),$(field "$j" step_predicted_s)"
      echo "$name,$mode,$ranks,compute,$(field "$j" compute_s),$(field "$j" compute_predicted_s)"
      [ "$ranks" -gt 1 ] && echo "$name,$mode,$ranks,data comm exposed,$(field "$j" exposed_comm_s),$(field "$j" exposed_comm_predicted_s)"
      for axis in tensor expert; do
        grep -q "\"${axis}_comm_s\"" "$j" &&
          echo "$name,$mode,$ranks,$axis comm,$(field "$j" "${axis}_comm_s"),$(field "$j" "${axis}_comm_predicted_s")"
      done
      true
    } >> "$out/prediction_accuracy.csv"
  done
done

# The machine's repeatability: the single process on its own links, REPEATS times more.
# How far the same run's measured step strays from run to run is a floor under any
# prediction's error here; how far its prediction strays says what the probe adds.
echo "repeat,measured_s,predicted_s" > "$out/repeatability.csv"
for r in $(seq 1 "$repeats"); do
  train 1 off --mesh data=1
  echo "$r,$(field "$tmp/run.jsonl" step_s),$(field "$tmp/run.jsonl" step_predicted_s)" >> "$out/repeatability.csv"
done

echo "train_gpt's prediction against the measured step, gpt-bench (MoE: E=4 k=2), batch $batch, medians of steps 3-$steps;"
echo "links: this machine's (off) or tpu-v5e's slowed ${scale}x (delay); error = measured / predicted - 1"
awk -F, -v min="$min_ms" '
  function abs(x) { return x < 0 ? -x : x }
  function pct(sorted, n, q,    i) { i = int(q * (n - 1) + 0.5) + 1; return sorted[i] }
  NR > 1 {
    key = $1 " " $2
    if (!(key in seen)) { seen[key] = 1; order[++runs] = key }
    if ($5 == "nan" || $6 == "nan") next
    cell[key, $4] = sprintf("%7.1f/%-7.1f %+5.0f%%", $5 * 1e3, $6 * 1e3, 100 * ($5 / $6 - 1))
    if ($6 * 1e3 < min) { cell[key, $4] = sprintf("%7.1f/%-7.1f   -   ", $5 * 1e3, $6 * 1e3); next }
    err = abs($5 / $6 - 1)
    comp = $4 ~ /comm/ ? "communication" : $4
    e[comp, ++n[comp]] = err
  }
  END {
    printf "%-16s %-22s %-22s %-22s %-22s\n", "layout links", "step ms meas/pred", "compute", "data comm exposed", "tensor|expert comm"
    for (r = 1; r <= runs; r++) {
      k = order[r]; model = (k, "tensor comm") in cell ? cell[k, "tensor comm"] : ((k, "expert comm") in cell ? cell[k, "expert comm"] : "")
      printf "%-16s %-22s %-22s %-22s %-22s\n", k, cell[k, "step"], cell[k, "compute"], cell[k, "data comm exposed"], model
    }
    printf "\n%-14s %5s %12s %12s\n", "|error|", "n", "median", "p90"
    split("step compute communication", comps, " ")
    for (c = 1; c <= 3; c++) {
      name = comps[c]; m = n[name]
      if (!m) continue
      for (i = 1; i <= m; i++) v[i] = e[name, i]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      printf "%-14s %5d %11.1f%% %11.1f%%\n", name, m, 100 * pct(v, m, 0.5), 100 * pct(v, m, 0.9)
    }
  }' "$out/prediction_accuracy.csv"

echo
echo "repeatability: the single process (off) run $repeats times more; spread = value / the repeats' median - 1"
awk -F, '
  function abs(x) { return x < 0 ? -x : x }
  function sort(a, n,    i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } }
  function mid(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  NR > 1 && $2 != "nan" && $3 != "nan" { n++; m[n] = $2; p[n] = $3; err[n] = abs($2 / $3 - 1); ms[n] = $2; ps[n] = $3 }
  END {
    if (!n) exit
    sort(ms, n); sort(ps, n); sort(err, n)
    mm = mid(ms, n); pm = mid(ps, n)
    for (i = 1; i <= n; i++) { dm[i] = abs(m[i] / mm - 1); dp[i] = abs(p[i] / pm - 1) }
    sort(dm, n); sort(dp, n)
    printf "  measured step  %7.1f-%-7.1f ms, |spread| median %4.1f%% max %4.1f%%\n", 1e3 * ms[1], 1e3 * ms[n], 100 * mid(dm, n), 100 * dm[n]
    printf "  predicted step %7.1f-%-7.1f ms, |spread| median %4.1f%% max %4.1f%%\n", 1e3 * ps[1], 1e3 * ps[n], 100 * mid(dp, n), 100 * dp[n]
    printf "  |error| of the %d runs: median %4.1f%% max %4.1f%%\n", n, 100 * mid(err, n), 100 * err[n]
  }' "$out/repeatability.csv"
