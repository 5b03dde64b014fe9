#!/usr/bin/env bash
# hf_convert.sh TRAIN_GPT GENERATE CONVERT CKPT_COMPARE MPIEXEC...: weights out to a Hugging
# Face directory and back (docs/models.md).
# - export then import is bit-exact, for a checkpoint of one process and for ones written by
#   2-rank runs (tensor=2 for gpt and llama with GQA, pipe=2 for gpt, ZeRO-3 for llama), and
#   through a sharded directory
#   (--max-shard-size; its index and shard names checked against transformers' format);
# - an independent numpy forward that follows transformers' conventions
#   (tests/hf_reference.py; skipped without numpy) decodes the exported GPT-2, and random
#   GPT-2 and LLaMA (GQA) models imported into shardlab, to shardlab's greedy tokens, and
#   would not with GPT-2's Conv1D transpose or LLaMA's RoPE q/k permutation left out;
# - train_gpt --init-from (the HF directory, or a checkpoint) starts at step 0 from exactly
#   those weights, on one process and under data=2 --zero 3; a model that disagrees with
#   them, or a corrupt safetensors file, is a clear error.
set -euo pipefail
train=$1; generate=$2; convert=$3; compare=$4; shift 4
mpiexec=("$@")
here=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/script_checks.sh"  # fail, expect_error
quiet=(--eval-every 0 --eval-batches 1 --eval-problems 0 --log-every 100 --threads 1)
gpt=(--model gpt-tiny --context 32 --batch 8 "${quiet[@]}")
llama=(--model llama-tiny --context 32 --d-model 32 --heads 4 --kv-heads 2 --d-ff 64 --layers 2 --batch 8 "${quiet[@]}")

roundtrip() {  # roundtrip NAME CKPT: export, import, compare every parameter bit for bit
  "$convert" --from "$2" --to "$dir/$1.hf" --format hf > /dev/null
  "$convert" --from "$dir/$1.hf" --to "$dir/$1.back.h5" > /dev/null
  "$compare" "$2" "$dir/$1.back.h5" params/ 0 > "$dir/$1.cmp" || { cat "$dir/$1.cmp"; fail "$1: import differs"; }
  echo "ok: $1: export then import is bit-exact"
}

"$train" "${gpt[@]}" --steps 4 --ckpt-dir "$dir/gpt" > /dev/null
roundtrip gpt "$dir/gpt/ckpt_000004.h5"
"${mpiexec[@]}" -n 2 "$train" "${gpt[@]}" --steps 2 --mesh tensor=2 --ckpt-dir "$dir/gpt_tp" > /dev/null
roundtrip gpt_tp "$dir/gpt_tp/ckpt_000002.h5"
"$train" "${llama[@]}" --steps 2 --ckpt-dir "$dir/llama" > /dev/null
roundtrip llama "$dir/llama/ckpt_000002.h5"
"${mpiexec[@]}" -n 2 "$train" "${llama[@]}" --steps 2 --mesh tensor=2 --ckpt-dir "$dir/llama_tp" > /dev/null
roundtrip llama_tp "$dir/llama_tp/ckpt_000002.h5"
"${mpiexec[@]}" -n 2 "$train" "${gpt[@]}" --steps 2 --mesh pipe=2 --ckpt-dir "$dir/gpt_pipe" > /dev/null
roundtrip gpt_pipe "$dir/gpt_pipe/ckpt_000002.h5"
"${mpiexec[@]}" -n 2 "$train" "${llama[@]}" --steps 2 --mesh data=2 --zero 3 --ckpt-dir "$dir/llama_zero3" > /dev/null
roundtrip llama_zero3 "$dir/llama_zero3/ckpt_000002.h5"
grep -q '"model_type": "llama"' "$dir/llama.hf/config.json" || fail "llama config.json: $(cat "$dir/llama.hf/config.json")"
# Sharded: past --max-shard-size (8 KiB here; gpt-tiny's wte alone is 16 KiB) the weights are
# split as transformers splits them, and the import reads the index.
out=$("$convert" --from "$dir/gpt/ckpt_000004.h5" --to "$dir/sharded.hf" --max-shard-size 8k)
grep -Eq "model.safetensors.index.json with [0-9]+ shards" <<<"$out" || fail "sharded export: $out"
"$convert" --from "$dir/sharded.hf" --to "$dir/sharded.h5" > /dev/null
"$compare" "$dir/gpt/ckpt_000004.h5" "$dir/sharded.h5" params/ 0 > /dev/null || fail "sharded: import differs"
echo "ok: sharded: export then import is bit-exact ($(grep -Eo '[0-9]+ shards' <<<"$out"))"

# The independent reference (tests/hf_reference.py): decoding the exports of the trained
# gpt and llama, it agrees with shardlab decoding their checkpoints; on random models whose every weight shows in the logits, imported into shardlab, it
# agrees, and disagrees with GPT-2's Conv1D transpose or LLaMA's q/k permutation left out.
python=/usr/bin/python3  # Debian's, where numpy is a package (python3-numpy)
reference=$here/hf_reference.py
if "$python" "$reference" check "$dir/gpt.hf" "$generate" "$dir/gpt/ckpt_000004.h5"; then
  "$python" "$reference" check "$dir/llama.hf" "$generate" "$dir/llama/ckpt_000002.h5" || fail "the llama export"
  for arch in gpt2 llama; do
    "$python" "$reference" make $arch "$dir/random_$arch.hf"
    "$convert" --from "$dir/random_$arch.hf" --to "$dir/random_$arch.h5" > /dev/null
    "$python" "$reference" check "$dir/random_$arch.hf" "$generate" "$dir/random_$arch.h5" --and-broken ||
      fail "the reference disagrees on the random $arch, or agrees with a convention left out"
  done
  "$python" "$reference" index "$dir/sharded.hf" || fail "the sharded export's files are not as transformers writes them"
  "$python" "$reference" check "$dir/sharded.hf" "$generate" "$dir/gpt/ckpt_000004.h5" || fail "the sharded export"
  echo "ok: the numpy reference agrees on gpt2 and llama, and disagrees with the Conv1D transpose or the RoPE permutation left out"
else
  [ $? -eq 77 ] || fail "the numpy GPT-2 reference disagrees with shardlab's greedy tokens"
fi

# --init-from: step 0 holds exactly the imported weights, in any layout.
"$train" "${gpt[@]}" --steps 2 --init-from "$dir/gpt.hf" --save-step0 --ckpt-dir "$dir/init1" --metrics "$dir/dir.jsonl" > /dev/null
"$compare" "$dir/gpt/ckpt_000004.h5" "$dir/init1/ckpt_000000.h5" params/ 0 > /dev/null || fail "--init-from DIR, one process"
# From the checkpoint itself (AdamW state, step 4): its state is not taken, so the same losses.
"$train" "${gpt[@]}" --steps 2 --init-from "$dir/gpt/ckpt_000004.h5" --ckpt-dir "$dir/init1f" --metrics "$dir/file.jsonl" > /dev/null
losses() { grep -o '"loss": [^,]*' "$1"; }
diff <(losses "$dir/dir.jsonl") <(losses "$dir/file.jsonl") > /dev/null || fail "--init-from FILE and DIR: losses differ"
[ "$(losses "$dir/file.jsonl" | wc -l)" -eq 2 ] && head -1 "$dir/file.jsonl" | grep -q '"step": 1,' ||
  fail "--init-from a step-4 checkpoint did not train steps 1 and 2: $(cat "$dir/file.jsonl")"
"${mpiexec[@]}" -n 2 "$train" "${gpt[@]}" --steps 1 --init-from "$dir/gpt.hf" --save-step0 --mesh data=2 --zero 3 \
  --ckpt-dir "$dir/init2" > /dev/null
"$compare" "$dir/gpt/ckpt_000004.h5" "$dir/init2/ckpt_000000.h5" params/ 0 > /dev/null || fail "--init-from DIR, ZeRO-3"
"${mpiexec[@]}" -n 2 "$train" "${llama[@]}" --steps 1 --init-from "$dir/llama.back.h5" --save-step0 --mesh tensor=2 \
  --ckpt-dir "$dir/init3" > /dev/null
"$compare" "$dir/llama/ckpt_000002.h5" "$dir/init3/ckpt_000000.h5" params/ 0 > /dev/null || fail "--init-from FILE, tensor=2"
echo "ok: --init-from starts at step 0 from the exact weights, without the file's optimizer state: HF directory on 1 process and ZeRO-3, checkpoint on 1 process and tensor=2"

expect_error "the weights have d_model 16 but this run's model has 32; pass --d-model 16" \
  "$train" "${gpt[@]}" --steps 1 --d-model 32 --init-from "$dir/gpt.hf" --ckpt-dir "$dir/bad"
cp -r "$dir/gpt.hf" "$dir/cut.hf"
head -c 4000 "$dir/gpt.hf/model.safetensors" > "$dir/cut.hf/model.safetensors"
expect_error "model.safetensors': tensor '.*': data_offsets .* lie outside" "$convert" --from "$dir/cut.hf" --to "$dir/cut.h5"
printf '\xff\xff\xff\x00\x00\x00\x00\x00{}' > "$dir/cut.hf/model.safetensors"
expect_error "header length 16777215 runs past the end of the file" \
  "$train" "${gpt[@]}" --steps 1 --init-from "$dir/cut.hf" --ckpt-dir "$dir/bad"
rm "$dir/sharded.hf/model-00002-of-"*
expect_error "index.json': shard 'model-00002-of-[0-9]{5}.safetensors', which holds tensor '.*' and [0-9]+ others, does not exist" \
  "$convert" --from "$dir/sharded.hf" --to "$dir/sharded2.h5"
expect_error "resume and --init-from exclude each other" "$train" --resume x.h5 --init-from "$dir/gpt.hf"
echo "ok: a mismatched model, corrupt safetensors files and a missing shard are clear errors"
