#!/usr/bin/env bash
# train_expert_layouts.sh TRAIN_GPT MPIEXEC...: expert-parallel checkpoints are layout-free.
# An MoE model (llama-moe-tiny: 4 experts, top-2) trained at expert=2 saves at step 4 and is
# resumed on one process, at expert=4 and at expert=2,tensor=2 with ZeRO-3; a one-process
# run saves at step 4 and is resumed at data=2,expert=2 with gradient accumulation. Every resumed run continues with the
# losses of an uninterrupted single-process run (1e-4 relative: fp32 summation order), and
# the expert=2 run's progress line reports the MoE statistics and the expert axis's time.
set -euo pipefail
train=$1; shift
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model llama-moe-tiny --capacity-factor 1.0 --batch 8 --steps 8 --warmup 2 --eval-every 0 --eval-batches 1
        --eval-problems 0 --log-every 4 --threads 1)
"$train" "${common[@]}" --metrics "$dir/full.jsonl" --ckpt-dir "$dir/full" --ckpt-every 4 > /dev/null
"${mpiexec[@]}" -n 2 "$train" "${common[@]}" --mesh expert=2 --ckpt-every 4 --metrics "$dir/ep2.jsonl" \
  --ckpt-dir "$dir/ep2" > "$dir/ep2.out"
grep -Eq "comm \(expert\) [0-9.]+ ms \(predicted [0-9.]+ ms\) \| step [0-9.]+ ms \(predicted [0-9.]+ ms\) \| MoE aux [0-9.]+, dropped [0-9.]+%, expert load max/mean [0-9.]+" \
  "$dir/ep2.out" || { cat "$dir/ep2.out"; echo "FAIL: no MoE figures on the progress line"; exit 1; }
grep -q '"moe_dropped_fraction"' "$dir/ep2.jsonl" || { echo "FAIL: no MoE figures in the JSONL"; exit 1; }
# Per step on the expert axis: 2 MoE layers x 4 all_to_alls of E*S*C*D floats (4 experts,
# 4 sequences per rank, ceil(1.0 * 16 * 2 / 4) = 8 slots, D 16: 8192 bytes), and the
# gradient norm's one float.
grep -q '"expert_comm_bytes": 65540[,}]' "$dir/ep2.jsonl" || { grep -o '"expert_comm_bytes": [^,]*' "$dir/ep2.jsonl";
  echo "FAIL: expert axis bytes per step differ from the formula's 65540"; exit 1; }
head -n 4 "$dir/ep2.jsonl" > "$dir/ep2_to_single.jsonl"
"$train" "${common[@]}" --resume "$dir/ep2/ckpt_000004.h5" --metrics "$dir/ep2_to_single.jsonl" --ckpt-dir "$dir/a" > /dev/null
head -n 4 "$dir/ep2.jsonl" > "$dir/ep2_to_ep4.jsonl"
"${mpiexec[@]}" -n 4 "$train" "${common[@]}" --mesh expert=4 --resume "$dir/ep2/ckpt_000004.h5" \
  --metrics "$dir/ep2_to_ep4.jsonl" --ckpt-dir "$dir/b" > /dev/null
head -n 4 "$dir/full.jsonl" > "$dir/single_to_dp2ep2.jsonl"
"${mpiexec[@]}" -n 4 "$train" "${common[@]}" --mesh data=2,expert=2 --grad-accum 2 --resume "$dir/full/ckpt_000004.h5" \
  --metrics "$dir/single_to_dp2ep2.jsonl" --ckpt-dir "$dir/c" > /dev/null
head -n 4 "$dir/ep2.jsonl" > "$dir/ep2_to_ep2tp2.jsonl"
"${mpiexec[@]}" -n 4 "$train" "${common[@]}" --mesh expert=2,tensor=2 --zero 3 --resume "$dir/ep2/ckpt_000004.h5" \
  --metrics "$dir/ep2_to_ep2tp2.jsonl" --ckpt-dir "$dir/d" > /dev/null
source "$(dirname "$0")/compare_losses.sh"
compare_losses "$dir" 8 ep2 ep2_to_single ep2_to_ep4 single_to_dp2ep2 ep2_to_ep2tp2
echo "ok: expert=2 -> 1 process, -> expert=4 and -> expert=2,tensor=2 (ZeRO-3); 1 process -> data=2,expert=2: the uninterrupted losses"
