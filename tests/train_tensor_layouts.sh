#!/usr/bin/env bash
# train_tensor_layouts.sh TRAIN_GPT MPIEXEC...: tensor-parallel checkpoints are
# layout-free too. A tensor=2 run saves at step 4 and is resumed at data=2 and on one
# process; a one-process run saves at step 4 and is resumed at tensor=4 (LLaMA with 2 kv
# heads: each kv head shared by two ranks). Every resumed run continues with the losses
# of an uninterrupted single-process run (to 1e-4 relative: fp32 summation order differs).
set -euo pipefail
train=$1; shift
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model llama-tiny --batch 8 --steps 8 --warmup 2 --eval-every 0 --eval-batches 1 --eval-problems 0
        --log-every 4 --threads 1)
"$train" "${common[@]}" --metrics "$dir/full.jsonl" --ckpt-dir "$dir/full" --ckpt-every 4 > /dev/null
"${mpiexec[@]}" -n 2 "$train" "${common[@]}" --mesh tensor=2 --ckpt-every 4 --metrics "$dir/tp2.jsonl" --ckpt-dir "$dir/tp2" > /dev/null
head -n 4 "$dir/tp2.jsonl" > "$dir/tp2_to_dp2.jsonl"
"${mpiexec[@]}" -n 2 "$train" "${common[@]}" --mesh data=2 --resume "$dir/tp2/ckpt_000004.h5" --metrics "$dir/tp2_to_dp2.jsonl" --ckpt-dir "$dir/a" > /dev/null
head -n 4 "$dir/tp2.jsonl" > "$dir/tp2_to_single.jsonl"
"$train" "${common[@]}" --resume "$dir/tp2/ckpt_000004.h5" --metrics "$dir/tp2_to_single.jsonl" --ckpt-dir "$dir/b" > /dev/null
head -n 4 "$dir/full.jsonl" > "$dir/single_to_tp4.jsonl"
"${mpiexec[@]}" -n 4 "$train" "${common[@]}" --mesh tensor=4 --zero 0 --resume "$dir/full/ckpt_000004.h5" --metrics "$dir/single_to_tp4.jsonl" --ckpt-dir "$dir/c" > /dev/null
source "$(dirname "$0")/compare_losses.sh"
compare_losses "$dir" 8 tp2 tp2_to_dp2 tp2_to_single single_to_tp4
echo "ok: tensor=2 -> data=2 and -> 1 process, 1 process -> tensor=4 resume with the uninterrupted losses"
