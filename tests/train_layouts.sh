#!/usr/bin/env bash
# train_layouts.sh TRAIN_GPT MPIEXEC...: checkpoints are layout-free. A ZeRO-3 run on 4
# ranks saves at step 4; runs resumed from it with ZeRO-1 on 2 ranks and on 1 process
# continue with the losses of an uninterrupted single-process run (fp32 summation order
# differs between layouts: losses must agree to 1e-4 relative).
set -euo pipefail
train=$1; shift
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model gpt-tiny --batch 8 --steps 8 --warmup 2 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 4 --threads 1)
"$train" "${common[@]}" --metrics "$dir/full.jsonl" --ckpt-dir "$dir/full" > /dev/null
"${mpiexec[@]}" -n 4 "$train" "${common[@]}" --mesh data=4 --zero 3 --ckpt-every 4 --metrics "$dir/zero3.jsonl" --ckpt-dir "$dir/z3" > /dev/null
head -n 4 "$dir/zero3.jsonl" > "$dir/zero1.jsonl"
"${mpiexec[@]}" -n 2 "$train" "${common[@]}" --mesh data=2 --zero 1 --resume "$dir/z3/ckpt_000004.h5" --metrics "$dir/zero1.jsonl" --ckpt-dir "$dir/z1" > /dev/null
head -n 4 "$dir/zero3.jsonl" > "$dir/single.jsonl"
"$train" "${common[@]}" --resume "$dir/z3/ckpt_000004.h5" --metrics "$dir/single.jsonl" --ckpt-dir "$dir/s" > /dev/null
source "$(dirname "$0")/compare_losses.sh"
compare_losses "$dir" 8 zero3 zero1 single
echo "ok: ZeRO-3 x4 -> ZeRO-1 x2 and -> 1 process resume with the uninterrupted losses"
