#!/usr/bin/env bash
# layout_matrix.sh [--cover] TRAIN_GPT MPIEXEC...: every layout trains the model one process
# trains. Each mesh of data, fsdp, pipe, expert, context and tensor axes of sizes 1 or 2 on 2, 4
# and 8 ranks (MAX_RANKS=32: five axes at once, 16 and 32 ranks too) -- expert only for the
# MoE model, context only for the dense ones, fsdp with ZeRO-3 and hybrid ZeRO-2 -- is crossed
# with the models (gpt-tiny, llama-tiny, llama-moe-tiny), the ZeRO stages its axes allow,
# and, in turn, a remat policy, a pipeline schedule, sequence parallelism and all-gather
# instead of ring attention where they apply. Each run's 6 losses must be within 1e-4
# relative of the single process's on the
# same global batch (16 sequences x 16 tokens, 2 microbatches), and rank 0's memory
# estimate (cost/model/autograd_activations.h) must be within 15% of its peak measured in step 1 (the
# tracker's bytes: deterministic; -14% to +15% over the full fp32 matrix). Prints one line per run
# and a table of passes per rank count; exits non-zero if any run differs or fails.
# --cover runs a representative cover (every axis, every ZeRO stage, each model, at 2, 4 and
# 8 ranks: the default CTest suite's), without it the whole matrix (ctest -L matrix).
# --bf16 trains every run, the single process's too, with --precision bf16 (PRECISION_FLAGS
# adds more, e.g. --bf16-matmul native) and allows BF16_TOLERANCE (default 1e-3) relative:
# both sides multiply the same bf16-rounded values, but fp32 sums in another order can
# round a value to the neighbouring bf16 (one step is 2^-8 = 3.9e-3 relative), and such
# flips spread through the six steps (measured: at most 2.5e-6 over the cover, on both
# paths, with --activation-dtype fp32). Activations and their gradients between
# model-parallel ranks travel in bf16 by default, so a sum over the tensor axis or a
# pipeline message rounds the residual stream, or its gradient, by up to 2^-8 where one
# process does not (measured: at most 1.3e-5 over the cover). With --reduce-dtype bf16 the
# ranks' gradients are also rounded to bf16 where the single process's are not: 2^-8 of
# each gradient moves a step's update by as much (measured, with both: at most 1.6e-5).
# The tolerance stays 1e-3: 60x the worst measured, a tenth of one bf16 step. The bf16 runs
# skip the start-up probe (--probe=false: peak loops and the layout's timed stand-in: the
# bf16 cover took 42 s with them, 35 s without); the fp32 runs keep them, so every layout's
# probe still runs.
set -uo pipefail
cover=0 tolerance=1e-4 precision=()
while [[ "${1:-}" == --* ]]; do
  case $1 in
    --cover) cover=1 ;;
    --bf16) precision=(--precision bf16 --probe=false ${PRECISION_FLAGS:-}); tolerance=${BF16_TOLERANCE:-1e-3} ;;
  esac
  shift
done
train=$1; shift
mpiexec=("$@")
source "$(dirname "$0")/matrix_common.sh"  # dir; model_flags, losses, meshes, ranks_of, models_of, zeros_of
common=(--batch 16 --grad-accum 2 --steps 6 --warmup 1 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 100 --threads 1 "${precision[@]}")

for model in gpt llama moe; do
  # shellcheck disable=SC2046
  "$train" "${common[@]}" $(model_flags $model) --metrics "$dir/ref_$model.jsonl" --ckpt-dir "$dir/ckpt" > /dev/null ||
    { echo "FAIL: the single-process $model run"; exit 1; }
done

declare -A passed total
failures=0
i=0
run_case() {  # run_case MODEL MESH ZERO EXTRA...
  local model=$1 mesh=$2 zero=$3; shift 3
  local ranks
  ranks=$(ranks_of "$mesh")
  local name="$model $mesh zero=$zero $*"
  local m="$dir/run$i.jsonl"
  i=$((i + 1))
  total[$ranks]=$(( ${total[$ranks]:-0} + 1 ))
  # shellcheck disable=SC2046
  if ! timeout 300 "${mpiexec[@]}" -n "$ranks" "$train" "${common[@]}" $(model_flags "$model") --mesh "$mesh" \
      --zero "$zero" "$@" --metrics "$m" --ckpt-dir "$dir/ckpt" > "$dir/out" 2>&1; then
    echo "FAIL  $name: exit non-zero"; tail -3 "$dir/out"; failures=$((failures + 1)); return
  fi
  local worst
  worst=$(paste <(losses "$dir/ref_$model.jsonl") <(losses "$m") |
          awk '{d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > w) w = d; n++} END {if (n != 6) print 1; else printf "%.1e", w}')
  # Rank 0's memory estimate (cost/model/autograd_activations.h) against the tracker's measured peak.
  local memory
  memory=$(sed -n 's/^memory per rank predicted:.*error \([-+0-9.]*\)%.*/\1/p' "$dir/out")
  if [ -z "$memory" ] || ! awk -v e="$memory" 'BEGIN {exit !(e <= 15 && e >= -15)}'; then
    echo "FAIL  $name: memory estimate off by ${memory:-?}% (more than 15%)"; failures=$((failures + 1))
  elif awk -v w="$worst" -v t="$tolerance" 'BEGIN {exit !(w <= t)}'; then
    passed[$ranks]=$(( ${passed[$ranks]:-0} + 1 ))
    printf "ok    %-60s worst loss difference %s, memory estimate %+.1f%%\n" "$name" "$worst" "$memory"
  else
    echo "FAIL  $name: worst relative loss difference $worst"; failures=$((failures + 1))
  fi
}

remats=(none full save-matmul)
schedules=(1f1b gpipe zero-bubble)
k=0 index=0
for mesh in $(meshes); do
  index=$((index + 1))
  for model in $(models_of "$mesh"); do
    read -r -a zeros <<< "$(zeros_of "$mesh" | tr '\n' ' ')"
    for zero in "${zeros[@]}"; do
      k=$((k + 1))
      if [ $cover = 1 ]; then  # per mesh one model (MoE where there is an expert axis) and one stage
        want=moe
        [[ $mesh != *expert* ]] && { [ $((index % 2)) = 1 ] && want=gpt || want=llama; }
        [ "$model" = "$want" ] && [ "$zero" = "${zeros[index % ${#zeros[@]}]}" ] || continue
      fi
      extra=(--remat "${remats[k % 3]}")
      [[ $mesh == *pipe* ]] && extra+=(--pp-schedule "${schedules[k % 3]}")
      # Sequence parallelism: dense models (MoE routes whole sequences).
      [[ $mesh == *tensor* && $model != moe && $((k % 2)) == 0 ]] && extra+=(--sequence-parallel)
      [[ $mesh == *context* && $((k % 2)) == 1 ]] && extra+=(--cp-comm allgather)
      run_case "$model" "$mesh" "$zero" "${extra[@]}"
    done
  done
done

echo "ranks  passed/runs"
for n in 2 4 8 16 32; do
  [ -n "${total[$n]:-}" ] || continue
  printf "%5d  %d/%d\n" "$n" "${passed[$n]:-0}" "${total[$n]:-0}"
done
[ $failures = 0 ] || { echo "$failures layouts differ from the single process or miss their memory"; exit 1; }
echo "ok: every layout trains the single process's model"
