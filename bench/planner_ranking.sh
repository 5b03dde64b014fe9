#!/usr/bin/env bash
# planner_ranking.sh: does the planner put the layout that trains fastest here first?
#
# For one model and global batch (gpt-bench, or MODEL=moe: its mixture-of-experts variant,
# 4 experts, top-2, every block), the layouts the planner considers -- its whole ranking at
# 2 ranks (DP, ZeRO-1/2, FSDP, TP with sequence parallelism, context parallelism, each
# pipeline schedule; EP for the MoE model) and FOUR of its 4-rank ranking spread evenly from
# its first to its last (the mixes), at one thread per rank -- and the one process they are
# compared with, each launched as the planner's ranking prints it (its "command"), train
# STEPS steps, every layout once per round, ROUNDS rounds in turn (the machine's drift hits
# every layout of a round alike). Per layout: the median over rounds of each run's median
# step (from its third), and so its speed against the one process (its step / the layout's
# step); the same ratio from the run's own prediction of itself (train_gpt's `predict`
# line), from the planner's ranking with --probe (`shardlab-plan train --cluster local
# --probe`: each layout's compute timed here as the run's start-up probe does, all of a
# ranking's shapes in interleaved rounds) and from the ranking without it (FLOPs and
# element-wise work at the measured profile's rates). Then, for each prediction, how well
# it orders the layouts:
#   kendall tau   tau-b between predicted and measured step times (1: the same order; ties,
#                 such as the planner's for layouts it does not tell apart, count as neither)
#   best within   how much slower the predicted best layout measured than the measured best
#                 (of layouts predicted equal-best, the slowest measured)
#   ratio error   median over layouts of |predicted ratio / measured ratio - 1|
# The last line is the planner's (with --probe). Writes $OUT/planner_ranking.csv (one row
# per run) and $OUT/planner_ranking_summary.csv (one per layout). docs/prediction.md shows
# the table.
# Usage: bench/planner_ranking.sh [build-dir]
#   (MODEL=gpt|moe STEPS=8 BATCH=8 ROUNDS=3 FOUR=6 OUT=runs/planner_ranking;
#    PRECISION=fp32|bf16, default: train_gpt's own on this machine)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
model=${MODEL:-gpt}
steps=${STEPS:-8}
batch=${BATCH:-8}
rounds=${ROUNDS:-3}
four=${FOUR:-6}
out=${OUT:-runs/planner_ranking}
source bench/metrics.sh  # median FILE FIELD, bench_setup DIR
bench_setup "$out"
precision=()
[ -n "${PRECISION:-}" ] && precision=(--precision "$PRECISION")
model_flags=(--model gpt-bench)
[ "$model" = moe ] && model_flags+=(--experts 4 --top-k 2 --moe-every 1)
sequence=256  # gpt-bench's T: the planner takes the batch in tokens

# The planner's rankings at 1, 2 and 4 ranks with --probe, once: per layout (as
# `summary|ranks|probed step|the ranking's one-process step|train_gpt flags|the planner's
# --layout flags`) the single process, every 2-rank layout and FOUR 4-rank ones. A
# ranking's speed-ups are against the one process it timed in the same rounds. Then each
# layout priced without --probe.
rank() {  # ranks flags... : the ranking's JSON
  local ranks=$1; shift
  "$build/examples/shardlab-plan" train --cluster local "${model_flags[@]}" "${precision[@]}" --chips "$ranks" \
    --threads 1 --batch $((batch * sequence)) --top 1000 --json "$@"
}
layouts=()
for ranks in 1 2 4; do
  rank "$ranks" --probe > "$tmp/probed.json"
  mapfile -t chosen < <(/usr/bin/python3 - "$tmp" "$ranks" "$four" <<'PY'
import json, sys
tmp, ranks, four = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ranking = json.load(open(f"{tmp}/probed.json"))
probed, one = ranking["ranked"], ranking["one_process_step_seconds"]
if ranks == 4 and len(probed) > four:  # spread over the ranking, its first and last included
    probed = [probed[round(i * (len(probed) - 1) / (four - 1))] for i in range(four)]
for e in probed:
    l = e["layout"]
    mesh = ",".join(f"{a}={l[a]}" for a in ("data", "fsdp", "context", "pipe", "expert", "tensor") if l[a] > 1) or "data=1"
    layout = f"--layout {mesh},microbatches={l['microbatches']} --zero {l['zero'] if l['zero'] < 3 else 0}"
    layout += " --sequence-parallel" * l["sequence_parallel"]
    layout += f" --pp-schedule {l['schedule']} --pp-virtual {l['virtual_stages']}" if l["pipe"] > 1 else ""
    print(f'{e["summary"]}|{ranks}|{e["step_seconds"]}|{one}|{e["command"].split("train_gpt", 1)[1].strip()}|{layout}')
PY
  )
  layouts+=("${chosen[@]}")
done
declare -A priced
for entry in "${layouts[@]}"; do
  IFS='|' read -r name ranks probed one flags layout <<< "$entry"
  # shellcheck disable=SC2086  # layout is a list of flags
  priced[$name]=$(rank "$ranks" $layout | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["step_seconds"])')
done

echo "round,layout,ranks,measured_s,run_predicted_s,planner_s,planner_one_s,formulas_s" > "$out/planner_ranking.csv"
for round in $(seq "$rounds"); do
  for entry in "${layouts[@]}"; do
    IFS='|' read -r name ranks probed one flags layout <<< "$entry"
    rm -f "$tmp/run.jsonl"
    # shellcheck disable=SC2086  # flags is a list
    mpirun --oversubscribe --bind-to none -n "$ranks" "$build/examples/train_gpt" $flags "${precision[@]}" \
      --steps "$steps" --warmup 1 --eval-every 0 --eval-problems 0 \
      --log-every 1000 --threads 1 --ckpt-dir "$tmp/ckpt" --metrics "$tmp/run.jsonl" > "$tmp/run.log" 2>&1 ||
      { echo "$name failed:"; tail -5 "$tmp/run.log"; exit 1; }
    row="$round,$name,$ranks,$(median "$tmp/run.jsonl" step_s),$(median "$tmp/run.jsonl" step_predicted_s),$probed,$one,${priced[$name]}"
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
predicted = {key: {n: med(n, f"{key}_s" if key != "run" else "run_predicted_s") for n in names}
             for key in ("run", "planner", "formulas")}
ranks = {r["layout"]: r["ranks"] for r in rows}
single = names[0]
planner_one = {n: med(n, "planner_one_s") for n in names}

def ratio(key, n):  # predicted speed-up over one process; the planner's against its own ranking's
    p = predicted[key]
    return (planner_one[n] if key == "planner" else p[single]) / p[n]

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

def summary(key):
    p = predicted[key]
    tau = tau_b([p[n] for n in names], [measured[n] for n in names])
    best_p = min(p.values())
    chosen = max(measured[n] for n in names if abs(p[n] - best_p) <= 1e-12 * best_p)
    within = 100 * (chosen / min(measured.values()) - 1)
    errors = [abs(ratio(key, n) / (measured[single] / measured[n]) - 1) for n in names if n != single]
    return tau, within, 100 * statistics.median(errors)

with open(f"{out}/planner_ranking_summary.csv", "w") as f:
    f.write("layout,ranks,measured_ms,measured_ratio,run_predicted_ms,run_ratio,planner_ms,planner_ratio,"
            "formulas_ms,formulas_ratio\n")
    print(f"\n{'layout':44} {'ranks':>5} {'measured ms':>12} {'ratio':>6} {'run predicts':>13} {'ratio':>6} "
          f"{'planner':>9} {'ratio':>6} {'no probe':>9} {'ratio':>6}")
    for n in sorted(names, key=lambda n: measured[n]):
        m, r, p, q = measured[n], predicted["run"][n], predicted["planner"][n], predicted["formulas"][n]
        ratios = [measured[single] / m, ratio("run", n), ratio("planner", n), ratio("formulas", n)]
        print(f"{n:44} {ranks[n]:>5} {1e3 * m:12.1f} {ratios[0]:6.2f} {1e3 * r:13.1f} {ratios[1]:6.2f} "
              f"{1e3 * p:9.1f} {ratios[2]:6.2f} {1e3 * q:9.1f} {ratios[3]:6.2f}")
        f.write(f"{n},{ranks[n]},{1e3 * m:.2f},{ratios[0]:.3f},{1e3 * r:.2f},{ratios[1]:.3f},{1e3 * p:.2f},{ratios[2]:.3f},"
                f"{1e3 * q:.2f},{ratios[3]:.3f}\n")
for label, key in (("the run's own prediction", "run"), ("the planner without --probe", "formulas"), (None, "planner")):
    tau, within, error = summary(key)
    line = f"kendall tau {tau:.2f}; predicted best within {within:.1f}% of measured best; ratio error median {error:.1f}%"
    print(f"\n{label}: {line}" if label else f"ranking: {line}")
EOF
