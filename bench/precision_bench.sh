#!/usr/bin/env bash
# precision_bench.sh: one training step (forward, backward, AdamW) in bf16 and fp32, shardlab
# and PyTorch, alternating in one run, on two shapes: gpt-bench (D 256, 4 layers, T 256,
# batch 8, V 256) and GPT-2 124M (D 768, 12 layers, 12 heads, V 50257, T 256, batch 4).
# Per variant: median tokens/s over the rounds, MFU of the measured fp32 FMA peak and of the
# measured bf16 dot-product peak (bench_train_step measures both, framework/peak.h; "-" on a
# CPU without avx512_bf16), peak RSS (GNU time's maximum resident set), and the ratio to
# shardlab fp32 measured in the same round. Also DP: train_gpt gpt-bench on 1 and 2
# ranks in bf16, alternating over the rounds, the median of the rounds' tokens/s ratios.
#   bench/precision_bench.sh                       # 2 threads, build/, 3 rounds of gpt-bench
#   ROUNDS=1 SHAPES=gpt2 bench/precision_bench.sh  # the 124M shape once (about 2 minutes)
#   SHAPES=" " bench/precision_bench.sh             # only the data-parallel rounds (about 45 s)
# Needs bench_train_step and train_gpt built in $BUILD_DIR; the PyTorch columns need
# `apt-get install python3-torch libopenblas0-openmp` (skipped, and said so, without it).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
build=${BUILD_DIR:-build}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
shapes=${SHAPES:-gpt-bench gpt2}
torch_script=${TORCH_BENCH:-bench/torch_gpt_bench.py}
have_torch=1
/usr/bin/python3 -c "import torch" 2> /dev/null || have_torch=0
log=$(mktemp)
trap 'rm -f "$log" "$log.out"' EXIT

# shape_flags SHAPE: the PyTorch script's flags (bench_train_step takes the same, but its
# one-letter model width as -d).
shape_flags() {
  case $1 in
    gpt-bench) echo "--batch 8 --ctx 256 --d 256 --layers 4 --heads 4 --vocab 256 --steps ${STEPS:-8} --warmup 2" ;;
    gpt2) echo "--batch 4 --ctx 256 --d 768 --layers 12 --heads 12 --vocab 50257 --steps ${STEPS:-4} --warmup 2" ;;
  esac
}
# run NAME COMMAND...: one measurement; appends "shape name tokens/s GFLOP/s rss_mb" to the
# log, and bench_train_step's measured peaks (GFLOP/s) as "peaks fp32 bf16".
run() {
  local name=$1; shift
  /usr/bin/time -f "rss_kb %M" "$@" > "$log.out" 2>&1 || { echo "FAIL: $name"; tail -5 "$log.out"; exit 1; }
  awk -v shape="$shape" -v name="$name" '
    $1 == "median" {tps = $5; gflops = $7}
    $1 == "rss_kb" {rss = $2 / 1024}
    END {printf "%s %s %s %s %.0f\n", shape, name, tps, gflops, rss}' "$log.out" | tee -a "$log"
  awk '$1 == "measured" && $2 == "peaks" {print "peaks", $4, $9}' "$log.out" >> "$log"
  grep -h '^dtype' "$log.out" | sed 's/^/    /' || true
}

for shape in $shapes; do
  # shellcheck disable=SC2046
  flags=$(shape_flags "$shape")
  ours=${flags/--d /-d }
  for round in $(seq "$rounds"); do
    echo "== $shape, round $round"
    # shellcheck disable=SC2086
    run shardlab-bf16 env OMP_NUM_THREADS="$threads" "$build/bench/bench_train_step" --threads "$threads" $ours --precision bf16
    # shellcheck disable=SC2086
    run shardlab-fp32 env OMP_NUM_THREADS="$threads" "$build/bench/bench_train_step" --threads "$threads" $ours
    if [ $have_torch = 1 ]; then
      # shellcheck disable=SC2086
      run torch-fp32 /usr/bin/python3 "$torch_script" --threads "$threads" $flags
      # shellcheck disable=SC2086
      run torch-autocast-bf16 /usr/bin/python3 "$torch_script" --threads "$threads" $flags --autocast-bf16
    fi
  done
done
[ $have_torch = 1 ] || echo "(PyTorch columns skipped: /usr/bin/python3 cannot import torch)"

echo "== data parallel in bf16: train_gpt gpt-bench, 1 and 2 ranks of one thread, alternating, $rounds round(s)"
dp_common=(--model gpt-bench --precision bf16 --batch 16 --steps 12 --warmup 2 --eval-every 0 --eval-batches 1
           --eval-problems 0 --log-every 1 --threads 1 --ckpt-dir "$(mktemp -d)" --data arithmetic)
tps() { grep -o '"tokens_per_s": [^,}]*' "$1" | awk '{print $2}' | tail -n +3 | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# One run of each per round, the two alternating: the VM's speed drifts by more than the
# 2.5% between 1.95x and 2x within minutes, so a single pair can land anywhere near it.
for round in $(seq "$rounds"); do
  OMP_NUM_THREADS=1 "$build/examples/train_gpt" "${dp_common[@]}" --metrics "$log.1" > /dev/null
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 mpirun --oversubscribe --bind-to none -n 2 \
    "$build/examples/train_gpt" "${dp_common[@]}" --mesh data=2 --metrics "$log.2" > /dev/null
  one=$(tps "$log.1"); two=$(tps "$log.2")
  echo "dp $one $two" >> "$log"
  awk -v r="$round" -v a="$one" -v b="$two" 'BEGIN {printf "  round %d: 1 rank %.0f tokens/s, 2 ranks %.0f tokens/s: %.2fx\n", r, a, b, b / a}'
  rm -f "$log.1" "$log.2"
done
awk '$1 == "dp" {print $3 / $2}' "$log" | sort -g |
  awk '{v[NR]=$1} END {printf "  2 ranks against 1, median of the rounds: %.2fx\n", v[int((NR+1)/2)]}'

[ -n "${shapes// /}" ] || exit 0  # SHAPES=" ": the data-parallel rounds alone
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
peak32=$(awk '$1 == "peaks" {print $2}' "$log" | median)
peak16=$(awk '$1 == "peaks" {print $3}' "$log" | median)
echo "== summary: medians over $rounds round(s), $threads threads; ratio to shardlab fp32"
echo "   measured peaks (median): fp32 $peak32 GFLOP/s (FMA loop), bf16 $peak16 GFLOP/s (vdpbf16ps loop)"
printf "  %-10s %-20s %12s %10s %10s %9s %8s\n" shape variant tokens/s "MFU fp32" "MFU bf16" "RSS MiB" ratio
for shape in $shapes; do
  base=$(awk -v s="$shape" '$1 == s && $2 == "shardlab-fp32" {print $3}' "$log" | median)
  for name in shardlab-bf16 shardlab-fp32 torch-fp32 torch-autocast-bf16; do
    awk -v s="$shape" -v n="$name" '$1 == s && $2 == n' "$log" | sort -k3 -g |
      awk -v s="$shape" -v n="$name" -v base="$base" -v p32="$peak32" -v p16="$peak16" '
        {t[NR] = $3; g[NR] = $4; r[NR] = $5}
        END {if (NR == 0) exit; k = int((NR + 1) / 2)
             m16 = p16 > 0 ? sprintf("%.1f%%", 100 * g[k] / p16) : "-"
             printf "  %-10s %-20s %12.0f %9.1f%% %10s %9s %8.2f\n", s, n, t[k], 100 * g[k] / p32, m16, r[k], t[k] / base}'
  done
done
