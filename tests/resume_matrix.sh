#!/usr/bin/env bash
# resume_matrix.sh TRAIN_GPT MPIEXEC... [PAIRS] [SEED]: any checkpoint resumes in any layout.
# For PAIRS (default 20) pairs of layouts drawn by a seeded generator (SEED, default 1) from
# the layout matrix (tests/matrix_common.sh), one model each: train 6 steps in the first
# layout saving at step 3, resume at step 3 in the second, and compare steps 4-6 with the
# uninterrupted single-process run (1e-4 relative). The checkpoint carries the optimizer
# state and the data position, so any difference in either shows in those losses.
set -uo pipefail
train=$1; shift
pairs=${PAIRS:-20} seed=${SEED:-1}
mpiexec=("$@")
source "$(dirname "$0")/matrix_common.sh"  # dir; model_flags, losses, meshes, ranks_of, models_of, zeros_of
common=(--batch 16 --grad-accum 2 --steps 6 --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 100 --threads 1 --probe=false --ckpt-every 3)
mapfile -t all < <(meshes)
RANDOM=$seed
pick() {  # pick MODEL: sets mesh and zero to a layout for MODEL chosen at random (no subshell,
          # so that RANDOM moves on)
  local model=$1 zeros
  while :; do
    mesh=${all[RANDOM % ${#all[@]}]}
    [[ $(models_of "$mesh") == *$model* ]] || continue
    mapfile -t zeros < <(zeros_of "$mesh")
    zero=${zeros[RANDOM % ${#zeros[@]}]}
    return
  done
}
run() {  # run MESH ZERO NAME ARGS...: trains; the metrics go to $dir/NAME.jsonl
  local mesh=$1 zero=$2 name=$3; shift 3
  timeout 300 "${mpiexec[@]}" -n "$(ranks_of "$mesh")" "$train" "${common[@]}" --mesh "$mesh" --zero "$zero" \
    --metrics "$dir/$name.jsonl" "$@" > "$dir/$name.out" 2>&1 || { tail -3 "$dir/$name.out"; return 1; }
}

failures=0
for model in gpt llama moe; do
  # shellcheck disable=SC2046
  "$train" "${common[@]}" $(model_flags $model) --metrics "$dir/full_$model.jsonl" --ckpt-dir "$dir/full_$model" \
    > /dev/null || { echo "FAIL: the single-process $model run"; exit 1; }
done
models=(gpt llama moe)
for ((p = 0; p < pairs; ++p)); do
  model=${models[RANDOM % 3]}
  pick $model
  from=$mesh from_zero=$zero
  pick $model
  to=$mesh to_zero=$zero
  name="$model: $from zero=$from_zero -> $to zero=$to_zero"
  # shellcheck disable=SC2046
  if ! run "$from" "$from_zero" "a$p" $(model_flags $model) --ckpt-dir "$dir/a$p"; then
    echo "FAIL  $name: the first run failed"; failures=$((failures + 1)); continue
  fi
  head -n 3 "$dir/a$p.jsonl" > "$dir/b$p.jsonl"
  # shellcheck disable=SC2046
  if ! run "$to" "$to_zero" "b$p" $(model_flags $model) --ckpt-dir "$dir/b$p" --resume "$dir/a$p/ckpt_000003.h5"; then
    echo "FAIL  $name: the resumed run failed"; failures=$((failures + 1)); continue
  fi
  worst=$(paste <(losses "$dir/full_$model.jsonl") <(losses "$dir/b$p.jsonl") |
          awk 'NR > 3 {d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > w) w = d; n++} END {if (n != 3) print 1; else printf "%.1e", w}')
  if awk -v w="$worst" 'BEGIN {exit !(w <= 1e-4)}'; then
    printf "ok    %-70s steps 4-6 within %s\n" "$name" "$worst"
  else
    echo "FAIL  $name: steps 4-6 differ by $worst (relative)"; failures=$((failures + 1))
  fi
done
[ $failures = 0 ] || { echo "$failures of $pairs resumes differ from the uninterrupted run"; exit 1; }
echo "ok: $pairs checkpoints resumed in another layout with the uninterrupted losses"
