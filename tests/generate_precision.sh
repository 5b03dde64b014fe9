#!/usr/bin/env bash
# generate_precision.sh GENERATE TRAIN_GPT MPIEXEC...: --precision bf16 decodes the fp32
# model's greedy text on the arithmetic task, on both bf16 matmul paths and on tensor=2,
# and says on stderr that it ran bf16 from the weights' bf16 copies.
#
# The checkpoint: gpt-tiny widened (context 32, D 32, F 128) and trained in fp32 for 1500
# steps (about 7 s on one thread) answers all 40 problems below correctly on several seeds.
# The 1-step checkpoint the other generate tests use will not do: its logits are nearly
# flat, and a bf16 rounding legitimately flips near-ties (so do checkpoints trained for
# 800 steps, measured). bf16 reproduces the text of a model that answers confidently, so
# the fp32 answers are checked first.
set -euo pipefail
generate=$1; train=$2; shift 2
mpiexec=("$@")
export OMP_NUM_THREADS=1
unset SHARDLAB_BF16_MATMUL
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$train" --model gpt-tiny --context 32 --d-model 32 --d-ff 128 --steps 1500 --lr 3e-3 --threads 1 --eval-every 0 \
    --eval-problems 0 --eval-batches 1 --log-every 1500 --ckpt-dir "$dir" --metrics "$dir/metrics.jsonl" > /dev/null
ckpt=$dir/ckpt_001500.h5

# 40 problems "ab+cd=", each answered by the reversed 3-digit sum and a newline.
for i in $(seq 0 39); do printf '%02d+%02d=\n' $(( (i * 37 + 11) % 100 )) $(( (i * 59 + 3) % 100 )); done > "$dir/prompts.txt"
args=(--ckpt "$ckpt" --prompts "$dir/prompts.txt" --max-new 4 --stop-at-newline)

fp32=$("$generate" "${args[@]}" --precision fp32 2>"$dir/err")
grep -q "^precision: fp32 compute" "$dir/err" || { echo "FAIL: no fp32 precision line: $(cat "$dir/err")"; exit 1; }
correct=0
while IFS= read -r line; do
  [[ $line =~ ^([0-9]{2})\+([0-9]{2})=([0-9]*)$ ]] || continue
  sum=$(printf '%03d' $((10#${BASH_REMATCH[1]} + 10#${BASH_REMATCH[2]})))
  [ "${BASH_REMATCH[3]}" = "${sum:2:1}${sum:1:1}${sum:0:1}" ] && correct=$((correct + 1))
done <<< "$fp32"
[ "$correct" -ge 36 ] || { echo "FAIL: the fp32 model answers $correct of 40 problems: too undertrained to compare"; exit 1; }
echo "ok: the fp32 model answers $correct of 40 problems"

# check_bf16 WHAT EXPECTED_PATH_TEXT COMMAND...: the same text, and a stderr line naming bf16,
# the path and the copies the matmuls read.
check_bf16() {
  local what=$1 path_text=$2; shift 2
  local text
  text=$("$@" 2>"$dir/err") || { echo "FAIL ($what): $(cat "$dir/err")"; exit 1; }
  if [ "$text" != "$fp32" ]; then
    echo "FAIL ($what): bf16 text differs from fp32's:"; diff <(echo "$fp32") <(echo "$text") || true; exit 1
  fi
  grep -q "^precision: bf16 compute.*bf16 matmuls: $path_text" "$dir/err" ||
    { echo "FAIL ($what): no bf16 precision line naming '$path_text': $(cat "$dir/err")"; exit 1; }
  grep -Eq "weights multiplied from .*copies made once: [0-9]+ tensors, .*, [1-9][0-9]* matmul operands" "$dir/err" ||
    { echo "FAIL ($what): the matmuls did not read the weights' copies: $(cat "$dir/err")"; exit 1; }
  echo "ok ($what): the fp32 text, $(grep -o '[0-9]* matmul operands' "$dir/err") from the weights' copies"
}
check_bf16 "SHARDLAB_BF16_MATMUL=native" "bf16 kernels forced" \
    env SHARDLAB_BF16_MATMUL=native "$generate" "${args[@]}" --precision bf16
check_bf16 "SHARDLAB_BF16_MATMUL=rounded" "fp32 kernels on bf16-rounded operands, forced" \
    env SHARDLAB_BF16_MATMUL=rounded "$generate" "${args[@]}" --precision bf16
check_bf16 "--bf16-matmul rounded" "fp32 kernels on bf16-rounded operands, forced" \
    "$generate" "${args[@]}" --precision bf16 --bf16-matmul rounded
check_bf16 "tensor=2, native" "bf16 kernels forced" \
    env SHARDLAB_BF16_MATMUL=native "${mpiexec[@]}" -n 2 "$generate" "${args[@]}" --precision bf16 --mesh tensor=2
