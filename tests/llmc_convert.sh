#!/usr/bin/env bash
# llmc_convert.sh TRAIN_GPT GENERATE CONVERT CKPT_COMPARE MPIEXEC...: weights to and from
# llm.c's GPT-2 model file (docs/models.md).
# - a random GPT-2 (V 300, padded to Vp 384) written by an independent numpy writer that
#   follows llm.c's layout (tests/llmc_reference.py) imports into a checkpoint on which
#   generate gives the numpy forward's greedy tokens, and exported again it is the same
#   file byte for byte (skipped without numpy);
# - a checkpoint of a 2-rank tensor=2 run exported to llm.c and to a Hugging Face
#   directory: the numpy reader finds the same tensors in both, bit for bit, and zero
#   padding rows; export then import gives back every parameter bit for bit;
# - train_gpt --init-from the llm.c file starts from its weights, under data=2 --zero 3;
# - a llama model, another magic and a truncated file are clear errors.
set -euo pipefail
train=$1; generate=$2; convert=$3; compare=$4; shift 4
mpiexec=("$@")
here=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/script_checks.sh"  # fail, expect_error
# llm.c's GPT-2: an MLP of 4 d_model; a vocabulary to pad (300 -> 384).
gpt=(--model gpt-tiny --context 32 --d-ff 64 --vocab 300 --batch 8 --eval-every 0 --eval-batches 1
     --eval-problems 0 --log-every 100 --threads 1)
python=/usr/bin/python3  # Debian's, where numpy is a package (python3-numpy)
reference=$here/llmc_reference.py

"${mpiexec[@]}" -n 2 "$train" "${gpt[@]}" --steps 2 --mesh tensor=2 --ckpt-dir "$dir/tp" > /dev/null
ckpt=$dir/tp/ckpt_000002.h5
out=$("$convert" --from "$ckpt" --to "$dir/m.bin" --format llmc)
grep -qF "wrote $dir/m.bin (llm.c, version 3" <<<"$out" || fail "export to llm.c: $out"
out=$("$convert" --from "$dir/m.bin" --to "$dir/back.h5")
grep -qF "gpt V=300 T=32 D=16 L=2 N=2 K=2 F=64" <<<"$out" || fail "import: $out"
"$compare" "$ckpt" "$dir/back.h5" params/ 0 > "$dir/cmp" || { cat "$dir/cmp"; fail "llm.c export then import differs"; }
echo "ok: export to llm.c then import is bit-exact (a tensor=2 checkpoint, V 300)"

if "$python" "$reference" make "$dir/random.bin"; then
  "$convert" --from "$dir/random.bin" --to "$dir/random.h5" > /dev/null
  "$python" "$reference" check "$dir/random.bin" "$generate" "$dir/random.h5" || fail "numpy reader and shardlab disagree"
  "$convert" --from "$dir/random.h5" --to "$dir/random_again.bin" --format llmc > /dev/null
  cmp "$dir/random.bin" "$dir/random_again.bin" || fail "the numpy writer's file, imported and exported, changed"
  "$convert" --from "$ckpt" --to "$dir/m.hf" --format hf > /dev/null
  "$python" "$reference" same "$dir/m.bin" "$dir/m.hf" || fail "the llm.c and Hugging Face exports differ"
  echo "ok: the numpy llm.c reader/writer agrees: greedy tokens, the file byte for byte, the tensors of both exports"
else
  [ $? -eq 77 ] || fail "the numpy llm.c reference failed"
fi

"${mpiexec[@]}" -n 2 "$train" "${gpt[@]}" --steps 1 --init-from "$dir/m.bin" --save-step0 --mesh data=2 --zero 3 \
  --ckpt-dir "$dir/init" > /dev/null
"$compare" "$ckpt" "$dir/init/ckpt_000000.h5" params/ 0 > /dev/null || fail "--init-from the llm.c file, ZeRO-3"
echo "ok: train_gpt --init-from the llm.c file starts from its exact weights (data=2 --zero 3)"

"$train" --model llama-tiny --context 32 --batch 8 --steps 1 --eval-every 0 --eval-batches 1 --eval-problems 0 \
  --threads 1 --ckpt-dir "$dir/llama" > /dev/null
expect_error "llm.c's model file holds GPT-2 models, not llama; export a llama model with --format hf" \
  "$convert" --from "$dir/llama/ckpt_000001.h5" --to "$dir/l.bin" --format llmc
head -c 5000 "$dir/m.bin" > "$dir/cut.bin"
expect_error "cut.bin': it has 5000 bytes, but the header's model .* needs [0-9]+; the file is truncated" \
  "$convert" --from "$dir/cut.bin" --to "$dir/cut.h5"
printf 'not a model file, nor a checkpoint' > "$dir/text.bin"
expect_error "text.bin' is not a shardlab checkpoint .*; --from takes a shardlab checkpoint, an llm.c model file" \
  "$convert" --from "$dir/text.bin" --to "$dir/t.h5"
expect_error "max-shard-size applies to an export with --format hf" \
  "$convert" --from "$ckpt" --to "$dir/x.bin" --format llmc --max-shard-size 1M
echo "ok: a llama model, a truncated file and a file of another kind are clear errors"
