#!/usr/bin/env bash
# compare_builds.sh: two builds of train_gpt side by side, for a change that must not
# change speed (a refactor). Runs the main layout of each strategy's benchmark -- DP and
# ZeRO-3 (dp_bench.sh), tensor=2 with sequence parallelism (tp_bench.sh), 1F1B on pipe=2
# (pp_bench.sh), expert=2 (ep_bench.sh) -- with the old and the new binary alternating,
# ROUNDS times each, and prints each one's median tokens/s and new / old. Alternating in
# one run is what makes the ratio mean something on a shared, drifting machine.
# Usage: bench/compare_builds.sh OLD-BUILD-DIR [NEW-BUILD-DIR]   (ROUNDS=3, STEPS=12)
#   git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build && \
#     cmake --build /tmp/old/build --target train_gpt -j"$(nproc)"
#   bench/compare_builds.sh /tmp/old/build build
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bench/compare_builds.sh OLD-BUILD-DIR [NEW-BUILD-DIR]}
source bench/train_bench.sh "${2:-build}"  # train (the new binary), steps, tmp, mpi, median
old_train=$old/examples/train_gpt
[ -x "$old_train" ] || { echo "no train_gpt in $old/examples: build it first (see the header)" >&2; exit 2; }
rounds=${ROUNDS:-3}
export OMP_NUM_THREADS=1
layouts=(
  "dp        | --model gpt-bench --batch 16 --mesh data=2"
  "zero3     | --model gpt-bench --batch 16 --mesh data=2 --zero 3"
  "tensor_sp | --model gpt-bench --batch 8 --mesh tensor=2 --sequence-parallel"
  "pipe_1f1b | --model gpt-bench --batch 8 --mesh pipe=2 --grad-accum 8 --pp-schedule 1f1b"
  "expert    | --model llama-moe-small --batch 16 --mesh expert=2"
)
common=(--steps "$steps" --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0 --log-every 1000
        --threads 1 --ckpt-dir "$tmp/ckpt")
for ((r = 0; r < rounds; ++r)); do
  for entry in "${layouts[@]}"; do
    name=$(echo "${entry%%|*}" | tr -d ' ')
    read -r -a args <<< "${entry#*|}"
    for which in old new; do
      binary=$train
      [ "$which" = old ] && binary=$old_train
      "${mpi[@]}" -n 2 "$binary" "${common[@]}" "${args[@]}" --metrics "$tmp/$name.$which.$r.jsonl" > /dev/null
    done
  done
done
# The median over rounds of each round's median tokens/s.
median_of_rounds() {
  local name=$1 which=$2 r
  for ((r = 0; r < rounds; ++r)); do median "$tmp/$name.$which.$r.jsonl" tokens_per_s; done | median_of
}
printf "%-10s %12s %12s %8s   (tokens/s, median of %d alternating rounds of %d steps, 2 ranks x 1 thread)\n" \
  layout old new new/old "$rounds" "$steps"
for entry in "${layouts[@]}"; do
  name=$(echo "${entry%%|*}" | tr -d ' ')
  a=$(median_of_rounds "$name" old) b=$(median_of_rounds "$name" new)
  awk -v n="$name" -v a="$a" -v b="$b" 'BEGIN {printf "%-10s %12.0f %12.0f %8.3f\n", n, a, b, b / a}'
done
