#!/usr/bin/env bash
# train_precision_parallel.sh TRAIN_GPT CKPT_COMPARE MPIEXEC...: under --precision bf16 the parameter
# all_gathers carry bf16 -- ZeRO-3's before each block, ZeRO-1's after the update -- so a
# training step's all_gather bytes, traced on rank 0, are exactly half of the fp32 run's,
# while gradients are still reduced in fp32 (its reduce_scatter and all_reduce bytes are
# equal). A step's bytes are a 3-step run's minus a 2-step run's: the checkpoint written at
# the end gathers fp32 masters in both precisions. The dry run plans the same halving.
# --reduce-dtype bf16 halves the gradients' reduce_scatter (ZeRO-3) and all_reduce (DP)
# bytes in the same way (the gradient norm's 4-byte all_reduce stays fp32). Tensor,
# pipeline and expert activations halve too (below).
# And a ZeRO-1 checkpoint holds the fp32 masters, not the bf16 values the ranks hold of
# each other's slices: its parameters match a single process's bf16 run within 1e-4 of
# each tensor's largest magnitude (a slice saved as bf16 would be off by up to 2^-9).
set -euo pipefail
# One bf16 matmul path for every run: `auto` times both paths at start-up, and two runs of a
# loaded machine can pick differently (their parameters then differ by far more than 1e-4).
export SHARDLAB_BF16_MATMUL=native
train=$1 compare=$2; shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model gpt-tiny --batch 8 --mesh data=2 --threads 1 --probe=false --eval-every 0 --eval-batches 1
        --eval-problems 0 --metrics "" --ckpt-dir "$dir")
# bytes FILE OP: rank 0's traced bytes of OP in a Chrome trace.
bytes() { grep -o "\"name\":\"$2\",[^}]*\"pid\":0,[^}]*\"bytes\":[0-9]*" "$1" | grep -o '"bytes":[0-9]*$' | cut -d: -f2 | awk '{s += $1} END {print s + 0}'; }
# planned FILE: the dry run's total all_gather bytes on data (its "all_gather" rows).
mpiexec=("$@")
# step_bytes ZERO PRECISION OP [REDUCE [GATHER]]: rank 0's traced bytes of OP in one
# training step with --reduce-dtype REDUCE (default fp32) and --gather-dtype GATHER
# (default auto); the runs are made once per setting.
step_bytes() {
  local reduce=${4:-fp32} gather=${5:-auto}
  local run="$dir/z$1_$2_${reduce}_$gather"
  if [ ! -f "${run}_3.json" ]; then
    for steps in 2 3; do
      "${mpiexec[@]}" -n 2 "$train" "${common[@]}" --steps $steps --zero "$1" --precision "$2" --reduce-dtype "$reduce" \
          --gather-dtype "$gather" --trace "${run}_$steps.json" > /dev/null
    done
  fi
  echo $(( $(bytes "${run}_3.json" "$3") - $(bytes "${run}_2.json" "$3") ))
}
for zero in 3 1; do
  gf=$(step_bytes $zero fp32 all_gather); gb=$(step_bytes $zero bf16 all_gather)
  [ "$gf" -gt 0 ] && [ "$gf" -eq $((2 * gb)) ] ||
    { echo "FAIL: ZeRO-$zero all_gather bytes per step fp32 $gf, bf16 $gb: not half"; exit 1; }
  for op in reduce_scatter all_reduce; do
    rf=$(step_bytes $zero fp32 $op); rb=$(step_bytes $zero bf16 $op)
    [ "$rf" -eq "$rb" ] || { echo "FAIL: ZeRO-$zero $op bytes per step fp32 $rf, bf16 $rb: gradients must stay fp32"; exit 1; }
  done
  echo "ok: ZeRO-$zero all_gather bytes per step fp32 $gf, bf16 $gb; gradient reductions equal"
done
# --reduce-dtype bf16: the gradients' reduce_scatter (ZeRO-3) and all_reduce (DP) carry
# half the bytes; the gradient norm's 4-byte all_reduce and the step guard's 12-byte one
# (signals and non-finite values, parallel/runtime/step_guard.h) stay fp32.
for zero in 3 0; do
  op=$([ $zero = 3 ] && echo reduce_scatter || echo all_reduce)
  norm=$([ $zero = 3 ] && echo 0 || echo 16)  # ZeRO-3's are all_reduces too, but not of this op
  rf=$(step_bytes $zero fp32 $op); rb=$(step_bytes $zero fp32 $op bf16)
  [ "$rf" -gt "$norm" ] && [ $((rf - norm)) -eq $((2 * (rb - norm))) ] ||
    { echo "FAIL: ZeRO-$zero $op bytes per step fp32 $rf, --reduce-dtype bf16 $rb: not half"; exit 1; }
  echo "ok: ZeRO-$zero gradient $op bytes per step fp32 $rf, --reduce-dtype bf16 $rb"
done
# int8 wires: n values travel as n bytes and one exponent byte per block of 256, so a
# step's gradient reductions (--reduce-dtype int8) and ZeRO-3's gathers (--gather-dtype
# int8) carry 3.95-3.99x fewer bytes than fp32 (each bucket's last block is partial).
ratio_ok() { awk -v a="$1" -v b="$2" 'BEGIN {r = a / b; exit !(r > 3.95 && r < 3.99)}'; }
for zero in 3 0; do
  op=$([ $zero = 3 ] && echo reduce_scatter || echo all_reduce)
  norm=$([ $zero = 3 ] && echo 0 || echo 16)
  rf=$(step_bytes $zero fp32 $op); ri=$(step_bytes $zero fp32 $op int8)
  ratio_ok $((rf - norm)) $((ri - norm)) ||
    { echo "FAIL: ZeRO-$zero $op bytes per step fp32 $rf, --reduce-dtype int8 $ri: not 3.95-3.99x fewer"; exit 1; }
  echo "ok: ZeRO-$zero gradient $op bytes per step fp32 $rf, --reduce-dtype int8 $ri"
done
gf=$(step_bytes 3 fp32 all_gather); gi=$(step_bytes 3 fp32 all_gather int8 int8)
ratio_ok "$gf" "$gi" || { echo "FAIL: ZeRO-3 all_gather bytes per step fp32 $gf, --gather-dtype int8 $gi"; exit 1; }
echo "ok: ZeRO-3 all_gather bytes per step fp32 $gf, --gather-dtype int8 $gi"
# The dry run plans the same halving: the planned bytes of its all_gather rows.
planned() { awk '$3 == "all_gather" {s += $4} END {print s + 0}' "$1"; }
for p in fp32 bf16; do
  "$@" -n 2 "$train" "${common[@]}" --steps 2 --zero 3 --precision $p --dry-run > "$dir/plan_$p.txt"
done
pf=$(planned "$dir/plan_fp32.txt"); pb=$(planned "$dir/plan_bf16.txt")
[ "$pf" -gt 0 ] && [ "$pf" -eq $((2 * pb)) ] || { echo "FAIL: the dry runs plan $pf and $pb all_gather bytes"; exit 1; }
echo "ok: the dry run plans $pf all_gather bytes in fp32, $pb in bf16"
# Activations between model-parallel ranks (--activation-dtype, the compute dtype by
# default) travel in bf16 under --precision bf16: per step, rank 0's traced bytes of each
# such collective on its axis are exactly half of fp32's -- sequence parallelism's
# reduce_scatters and the collective matmul's ppermutes on tensor, the pipeline's sends
# (LLaMA: no tied embedding, whose gradient exchange stays fp32) and the experts'
# all_to_alls -- and --activation-dtype fp32 puts fp32 back (checked on the tensor axis).
axis_bytes() { grep -o "\"name\":\"$2\",[^}]*\"pid\":0,[^}]*\"axis\":\"$3\",[^}]*\"bytes\":[0-9]*" "$1" |
               grep -o '"bytes":[0-9]*$' | cut -d: -f2 | awk '{s += $1} END {print s + 0}'; }
# layout_bytes NAME OP AXIS FLAGS...: rank 0's traced bytes of OP on AXIS in one step of a
# 2-rank run with FLAGS (run once per NAME).
layout_bytes() {
  local run="$dir/layout_$1" op=$2 axis=$3; shift 3
  if [ ! -f "${run}_3.json" ]; then
    for steps in 2 3; do
      "${mpiexec[@]}" -n 2 "$train" "${common[@]}" "$@" --steps $steps --trace "${run}_$steps.json" > /dev/null
    done
  fi
  echo $(( $(axis_bytes "${run}_3.json" "$op" "$axis") - $(axis_bytes "${run}_2.json" "$op" "$axis") ))
}
tp=(--mesh data=1,tensor=2 --sequence-parallel --tp-overlap)
pp=(--model llama-tiny --mesh data=1,pipe=2 --grad-accum 2)
ep=(--model llama-moe-tiny --mesh data=1,expert=2)
for c in "tp reduce_scatter tensor" "tp ppermute tensor" "pp send pipe" "ep all_to_all expert"; do
  read -r layout op axis <<< "$c"
  declare -n flags=$layout
  f=$(layout_bytes "${layout}_fp32" "$op" "$axis" "${flags[@]}" --precision fp32)
  b=$(layout_bytes "${layout}_bf16" "$op" "$axis" "${flags[@]}" --precision bf16)
  o=$f
  [ "$layout" = tp ] && o=$(layout_bytes "${layout}_optout" "$op" "$axis" "${flags[@]}" --precision bf16 --activation-dtype fp32)
  [ "$f" -gt 0 ] && [ "$f" -eq $((2 * b)) ] && [ "$o" -eq "$f" ] ||
    { echo "FAIL: $op bytes per step on $axis: fp32 $f, bf16 $b, bf16 with --activation-dtype fp32 $o"; exit 1; }
  echo "ok: $op bytes per step on $axis: fp32 $f, bf16 $b$([ "$layout" = tp ] && echo " (--activation-dtype fp32: $o)")"
  unset -n flags
done
# A dtype activations cannot travel in is refused on every rank, naming the choices.
if "${mpiexec[@]}" -n 2 "$train" "${common[@]}" "${ep[@]}" --steps 1 --precision fp32 --activation-dtype int8 > "$dir/refused.txt" 2>&1 ||
   [ "$(grep -c "activation-dtype 'int8' must be auto (the compute dtype, fp32), fp32 or bf16" "$dir/refused.txt")" -lt 1 ]; then
  echo "FAIL: --activation-dtype int8 was not refused clearly:"; cat "$dir/refused.txt"; exit 1
fi
echo "ok: --activation-dtype int8 refused"
# The dry run plans the same: the experts' all_to_all rows, and the pipeline's message size.
for p in fp32 bf16; do
  "$@" -n 2 "$train" "${common[@]}" "${ep[@]}" --steps 2 --precision $p --dry-run > "$dir/ep_plan_$p.txt"
  "$@" -n 2 "$train" "${common[@]}" "${pp[@]}" --steps 2 --precision $p --dry-run > "$dir/pp_plan_$p.txt"
done
a2a() { awk '$3 == "all_to_all" {s += $4} END {print s + 0}' "$1"; }
message() { sed -n 's/.*gradient message \([0-9]*\) bytes.*/\1/p' "$1"; }
pf=$(a2a "$dir/ep_plan_fp32.txt"); pb=$(a2a "$dir/ep_plan_bf16.txt")
mf=$(message "$dir/pp_plan_fp32.txt"); mb=$(message "$dir/pp_plan_bf16.txt")
[ "$pf" -gt 0 ] && [ "$pf" -eq $((2 * pb)) ] && [ -n "$mf" ] && [ "$mf" -gt 0 ] && [ "$mf" -eq $((2 * mb)) ] ||
  { echo "FAIL: the dry runs plan all_to_all bytes $pf and $pb, pipeline messages of $mf and $mb bytes"; exit 1; }
echo "ok: the dry run plans $pf all_to_all bytes in fp32, $pb in bf16; pipeline messages of $mf and $mb bytes"
"$train" "${common[@]}" --mesh data=1 --steps 3 --precision bf16 --ckpt-dir "$dir/one" > /dev/null
"$@" -n 2 "$train" "${common[@]}" --steps 3 --zero 1 --precision bf16 --ckpt-dir "$dir/zero1" > /dev/null
"$compare" "$dir/one/ckpt_000003.h5" "$dir/zero1/ckpt_000003.h5" params/ 1e-4
