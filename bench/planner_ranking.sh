#!/usr/bin/env bash
# planner_ranking.sh: does the planner put the layout that trains fastest here first?
#
# For one model and global batch (gpt-bench, or MODEL=moe: its mixture-of-experts variant,
# 4 experts, top-2, every block), every layout below -- DP, ZeRO-1/2/3, TP with and without
# sequence parallelism and the collective matmul, the pipeline schedules, context and
# expert parallelism, and their mixes, at 2 and 4 ranks of one thread each, and the one
# process they are compared with -- trains STEPS steps, every layout once per round, ROUNDS
# rounds in turn (the machine's drift hits every layout of a round alike). Per layout:
# the median over rounds of each run's median step (from its third), and so its speed
# against the one process (its step / the layout's step); the same ratio from the run's own
# prediction of itself (train_gpt's `predict` line) and from `shardlab-plan train --cluster
# local --layout ...` (the planner's estimate on this machine's measured profile). Then, for
# each of the two predictions, how well it orders the layouts:
#   kendall tau   tau-b between predicted and measured step times (1: the same order; ties,
#                 such as the planner's for layouts it does not tell apart, count as neither)
#   best within   how much slower the predicted best layout measured than the measured best
#                 (of layouts predicted equal-best, the slowest measured)
#   ratio error   median over layouts of |predicted ratio / measured ratio - 1|
# The last line is the planner's. Writes $OUT/planner_ranking.csv (one row per run) and
# $OUT/planner_ranking_summary.csv (one per layout). docs/prediction.md shows the table.
# Usage: bench/planner_ranking.sh [build-dir]
#   (MODEL=gpt|moe STEPS=8 BATCH=8 ROUNDS=3 OUT=runs/planner_ranking; PRECISION=fp32|bf16,
#    default: train_gpt's own on this machine)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
model=${MODEL:-gpt}
steps=${STEPS:-8}
batch=${BATCH:-8}
rounds=${ROUNDS:-3}
out=${OUT:-runs/planner_ranking}
source bench/metrics.sh  # median FILE FIELD, bench_setup DIR
bench_setup "$out"
precision=()
[ -n "${PRECISION:-}" ] && precision=(--precision "$PRECISION")

# name|ranks|mesh|flags: train_gpt's flags; the planner gets the mesh, the microbatches
# (--grad-accum) and the other flags but --tp-overlap.
if [ "$model" = moe ]; then
  model_flags=(--model gpt-bench --experts 4 --top-k 2 --moe-every 1)
  layouts=(
    "single|1|data=1|"
    "dp|2|data=2|"
    "zero1|2|data=2|--zero 1"
    "fsdp|2|fsdp=2|"
    "ep|2|expert=2|"
    "tp|2|tensor=2|"
    "pp_1f1b|2|pipe=2|--grad-accum 4"
    "dp_ep|4|data=2,expert=2|"
    "ep_tp|4|expert=2,tensor=2|"
    "dp4|4|data=4|"
  )
else
  model_flags=(--model gpt-bench)
  layouts=(
    "single|1|data=1|"
    "dp|2|data=2|"
    "zero1|2|data=2|--zero 1"
    "zero2|2|data=2|--zero 2"
    "fsdp|2|fsdp=2|"
    "tp|2|tensor=2|"
    "tp_sp|2|tensor=2|--sequence-parallel"
    "tp_overlap|2|tensor=2|--sequence-parallel --tp-overlap"
    "cp|2|context=2|"
    "pp_gpipe|2|pipe=2|--grad-accum 4 --pp-schedule gpipe"
    "pp_1f1b|2|pipe=2|--grad-accum 4"
    "pp_interleaved|2|pipe=2|--grad-accum 4 --pp-schedule interleaved --pp-virtual 2"
    "pp_zb|2|pipe=2|--grad-accum 4 --pp-schedule zero-bubble"
    "dp4|4|data=4|"
    "dp_tp|4|data=2,tensor=2|"
    "fsdp_tp|4|fsdp=2,tensor=2|"
    "dp_pp|4|data=2,pipe=2|--grad-accum 4"
  )
fi
sequence=256  # gpt-bench's T: the planner takes the batch in tokens

# The planner's step for each layout, once (it is a formula: no rounds).
declare -A planner
for entry in "${layouts[@]}"; do
  IFS='|' read -r name ranks mesh flags <<< "$entry"
  accum=$(grep -o -- "--grad-accum [0-9]*" <<< "$flags" | awk "{print \$2}" || true)
  [ -n "$accum" ] && mesh="$mesh,microbatches=$accum"
  # The planner takes --zero, --sequence-parallel and --pp-schedule/--pp-virtual as train_gpt
  # does; the collective matmul (--tp-overlap) it does not price.
  planner_flags=$(sed -E 's/--grad-accum [0-9]+//; s/--tp-overlap//' <<< "$flags")
  # shellcheck disable=SC2086
  planner[$name]=$("$build/examples/shardlab-plan" train --cluster local "${model_flags[@]}" "${precision[@]}" \
    --chips "$ranks" --threads 1 --batch $((batch * sequence)) --layout "$mesh" $planner_flags --json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["step_seconds"])')
done

echo "round,layout,ranks,measured_s,run_predicted_s,planner_s" > "$out/planner_ranking.csv"
for round in $(seq "$rounds"); do
  for entry in "${layouts[@]}"; do
    IFS='|' read -r name ranks mesh flags <<< "$entry"
    rm -f "$tmp/run.jsonl"
    # shellcheck disable=SC2086  # flags is a list
    mpirun --oversubscribe --bind-to none -n "$ranks" "$build/examples/train_gpt" "${model_flags[@]}" "${precision[@]}" \
      --mesh "$mesh" $flags --batch "$batch" --steps "$steps" --warmup 1 --eval-every 0 --eval-problems 0 \
      --log-every 1000 --threads 1 --ckpt-dir "$tmp/ckpt" --metrics "$tmp/run.jsonl" > "$tmp/run.log" 2>&1 ||
      { echo "$name failed:"; tail -5 "$tmp/run.log"; exit 1; }
    row="$round,$name,$ranks,$(median "$tmp/run.jsonl" step_s),$(median "$tmp/run.jsonl" step_predicted_s),${planner[$name]}"
    echo "$row" >> "$out/planner_ranking.csv"
    echo "$row"
  done
done

/usr/bin/python3 - "$out" <<'EOF'
import csv, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/planner_ranking.csv")))
names = list(dict.fromkeys(r["layout"] for r in rows))
def med(name, key): return statistics.median(float(r[key]) for r in rows if r["layout"] == name)
measured = {n: med(n, "measured_s") for n in names}
predicted = {"run": {n: med(n, "run_predicted_s") for n in names}, "planner": {n: med(n, "planner_s") for n in names}}
ranks = {r["layout"]: r["ranks"] for r in rows}
single = names[0]

def tau_b(a, b):  # Kendall's tau-b of two equally long lists
    conc = disc = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0: continue
            if da == 0: ties_a += 1
            elif db == 0: ties_b += 1
            elif da * db > 0: conc += 1
            else: disc += 1
    n = ((conc + disc + ties_a) * (conc + disc + ties_b)) ** 0.5
    return (conc - disc) / n if n else 0.0

def summary(p):
    tau = tau_b([p[n] for n in names], [measured[n] for n in names])
    best_p = min(p.values())
    chosen = max(measured[n] for n in names if abs(p[n] - best_p) <= 1e-12 * best_p)
    within = 100 * (chosen / min(measured.values()) - 1)
    errors = [abs((p[single] / p[n]) / (measured[single] / measured[n]) - 1) for n in names if n != single]
    return tau, within, 100 * statistics.median(errors)

with open(f"{out}/planner_ranking_summary.csv", "w") as f:
    f.write("layout,ranks,measured_ms,measured_ratio,run_predicted_ms,run_ratio,planner_ms,planner_ratio\n")
    print(f"\n{'layout':16} {'ranks':>5} {'measured ms':>12} {'ratio':>6} {'run predicts':>13} {'ratio':>6} {'planner':>9} {'ratio':>6}")
    for n in sorted(names, key=lambda n: measured[n]):
        m, r, p = measured[n], predicted["run"][n], predicted["planner"][n]
        ratios = [measured[single] / m, predicted["run"][single] / r, predicted["planner"][single] / p]
        print(f"{n:16} {ranks[n]:>5} {1e3 * m:12.1f} {ratios[0]:6.2f} {1e3 * r:13.1f} {ratios[1]:6.2f} {1e3 * p:9.1f} {ratios[2]:6.2f}")
        f.write(f"{n},{ranks[n]},{1e3 * m:.2f},{ratios[0]:.3f},{1e3 * r:.2f},{ratios[1]:.3f},{1e3 * p:.2f},{ratios[2]:.3f}\n")
for label, key in (("the run's own prediction", "run"), (None, "planner")):
    tau, within, error = summary(predicted[key])
    line = f"kendall tau {tau:.2f}; predicted best within {within:.1f}% of measured best; ratio error median {error:.1f}%"
    print(f"\n{label}: {line}" if label else f"ranking: {line}")
EOF
