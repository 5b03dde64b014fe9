#!/usr/bin/env bash
# plan_memory.sh TRAIN_GPT SHARDLAB_PLAN MPIEXEC...: the planner's memory per rank for this
# machine (shardlab-plan train --cluster local --layout L) is within 15% of the peak that
# train_gpt's memory tracker measures in step 1 of the same layout, and so is train_gpt's
# own estimate (cost/model/autograd_activations.h). One layout per strategy on 2 ranks (the
# pipeline under three schedules), gpt-bench at 4 sequences of 256 tokens (a context rank:
# 128 of each, its ring attention's saved tensors), and two of them in bf16, whose matmuls
# keep bf16 operands.
set -uo pipefail
train=$1 plan=$2; shift 2
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1 SHARDLAB_LOCAL_PROFILE="$dir/local.profile"

# MiB from train_gpt's "a peak of 72.63 MiB measured in step 1" (KiB/MiB/GiB).
measured_mib() {
  sed -n 's/.*against a peak of \([0-9.]*\) \([KMG]i\)B measured in step 1.*/\1 \2/p' "$1" |
    awk '{f = $2 == "Ki" ? 1 / 1024 : $2 == "Gi" ? 1024 : 1; printf "%.3f", $1 * f}'
}

failures=0
check() {  # check PLAN_LAYOUT TRAIN_FLAGS...
  local layout=$1; shift
  if ! "${mpiexec[@]}" -n 2 "$train" --model gpt-bench --batch 4 --steps 1 --warmup 0 --eval-every 0 \
      --eval-batches 1 --eval-problems 0 --probe=false "$@" > "$dir/out" 2>&1; then
    echo "FAIL  $layout: train_gpt exited non-zero"; tail -3 "$dir/out"; failures=$((failures + 1)); return
  fi
  local measured planned own
  measured=$(measured_mib "$dir/out")
  own=$(sed -n 's/^memory per rank predicted:.*error \([-+0-9.]*\)%.*/\1/p' "$dir/out")
  planned=$("$plan" train --cluster local --model gpt-bench --batch 1024 --chips 2 --layout "$layout" "${plan_flags[@]}" --json |
            tr -d ' \n' | sed -n 's/.*"memory_per_chip":{[^}]*"total":\([0-9.e+]*\).*/\1/p')
  if [ -z "$measured" ] || [ -z "$planned" ] || [ -z "$own" ]; then
    echo "FAIL  $layout: no measured peak, plan or estimate in the output"; failures=$((failures + 1)); return
  fi
  local error
  error=$(awk -v m="$measured" -v p="$planned" 'BEGIN {printf "%+.1f", 100 * (m / (p / 1048576) - 1)}')
  if awk -v e="$error" -v o="$own" 'BEGIN {exit !(e <= 15 && e >= -15 && o <= 15 && o >= -15)}'; then
    printf "ok    %-28s measured %8.2f MiB | planner %+6s%% | train_gpt's estimate %+6s%%\n" "$layout ${plan_flags[*]}" \
      "$measured" "$error" "$own"
  else
    echo "FAIL  $layout ${plan_flags[*]}: measured $measured MiB, planner off by $error%, train_gpt's estimate by $own% (limit 15%)"
    failures=$((failures + 1))
  fi
}

plan_flags=()
check data=2 --mesh data=2
check fsdp=2 --mesh fsdp=2 --zero 3
check tensor=2 --mesh tensor=2
check pipe=2,microbatches=2 --mesh pipe=2 --grad-accum 2
check context=2 --mesh context=2 --zero 3  # the planner's context x fsdp group is ZeRO-3
# The pipeline's schedules, each priced at the moments it starts a backward: zero-bubble's
# waiting weight passes, and interleaved stages of half a rank's blocks.
plan_flags=(--pp-schedule zero-bubble)
check pipe=2,microbatches=4 --mesh pipe=2 --grad-accum 4 --pp-schedule zero-bubble
plan_flags=(--pp-schedule interleaved --pp-virtual 2)
check pipe=2,microbatches=4 --mesh pipe=2 --grad-accum 4 --pp-schedule interleaved --pp-virtual 2
# bf16 on oneDNN's bf16 kernels (any CPU: oneDNN emulates them without bf16 instructions):
# the matmuls keep bf16 operands, and both count them so.
export SHARDLAB_BF16_MATMUL=native
plan_flags=(--precision bf16)
check fsdp=2 --mesh fsdp=2 --zero 3 --precision bf16
check tensor=2 --mesh tensor=2 --precision bf16
[ $failures = 0 ] || { echo "$failures layouts: the memory estimate misses the measured peak"; exit 1; }
echo "ok: the planner's memory per rank is within 15% of the measured peak"
