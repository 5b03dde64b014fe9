#!/usr/bin/env bash
# train_pipeline_layouts.sh TRAIN_GPT MPIEXEC...: pipeline runs equal the single process
# and their checkpoints are layout-free. A pipe=2 run (1F1B, GPT's tied embedding on both
# stages) saves at step 4, each stage writing its part of one file, and is resumed on one
# process; a one-process run saves at step 4 and is resumed at pipe=2 x data=2 with
# ZeRO-1 and at pipe=4 with the zero-bubble schedule. The pipe=2 run also goes with every
# message forced through MPI's rendezvous protocol (eager limits of 64 bytes, vader's least: every activation is larger), so the
# schedule's order -- not MPI's buffering -- is what keeps it from deadlocking. Every run
# has the losses of an uninterrupted single-process run (to 1e-4 relative).
set -euo pipefail
train=$1; shift
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model gpt-tiny --layers 4 --batch 8 --grad-accum 4 --steps 8 --warmup 2 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 4 --threads 1)
rendezvous=(--mca btl self,vader --mca btl_vader_eager_limit 64 --mca btl_vader_rndv_eager_limit 64)
"$train" "${common[@]}" --metrics "$dir/full.jsonl" --ckpt-dir "$dir/full" --ckpt-every 4 > /dev/null
"${mpiexec[@]}" "${rendezvous[@]}" -n 2 "$train" "${common[@]}" --mesh pipe=2 --ckpt-every 4 \
  --metrics "$dir/pp2.jsonl" --ckpt-dir "$dir/pp2" > /dev/null
head -n 4 "$dir/pp2.jsonl" > "$dir/pp2_to_single.jsonl"
"$train" "${common[@]}" --resume "$dir/pp2/ckpt_000004.h5" --metrics "$dir/pp2_to_single.jsonl" --ckpt-dir "$dir/a" > /dev/null
head -n 4 "$dir/full.jsonl" > "$dir/single_to_dp2pp2.jsonl"
"${mpiexec[@]}" -n 4 "$train" "${common[@]}" --mesh data=2,pipe=2 --zero 1 --resume "$dir/full/ckpt_000004.h5" \
  --metrics "$dir/single_to_dp2pp2.jsonl" --ckpt-dir "$dir/b" > /dev/null
head -n 4 "$dir/full.jsonl" > "$dir/single_to_pp4.jsonl"
"${mpiexec[@]}" -n 4 "$train" "${common[@]}" --mesh pipe=4 --pp-schedule zero-bubble --resume "$dir/full/ckpt_000004.h5" \
  --metrics "$dir/single_to_pp4.jsonl" --ckpt-dir "$dir/c" > /dev/null
source "$(dirname "$0")/compare_losses.sh"
compare_losses "$dir" 8 pp2 pp2_to_single single_to_dp2pp2 single_to_pp4
echo "ok: pipe=2 (rendezvous only) -> 1 process, 1 process -> data=2,pipe=2 ZeRO-1 and -> pipe=4 zero-bubble resume with the uninterrupted losses"
