#!/usr/bin/env bash
# generate_batch.sh GENERATE CKPT MPIEXEC...: a --prompts batch (left-padded prompts of
# unequal lengths) gives each prompt the text it gets alone, on one process and on
# tensor=2; --sliding-window runs past the context, its first tokens as without it.
set -euo pipefail
generate=$1; ckpt=$2; shift 2
mpiexec=("$@")
export OMP_NUM_THREADS=1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
printf '12+34=\n7+8=\n\n123+456=\n' > "$dir/prompts.txt"   # the empty line is skipped
for flags in "--max-new 6" "--max-new 8 --stop-at-newline"; do
  expected=""
  while IFS= read -r prompt; do
    [ -z "$prompt" ] && continue
    one=$("$generate" --ckpt "$ckpt" --prompt "$prompt" $flags 2>/dev/null)
    expected+="${expected:+$'\n---\n'}$one"
  done < "$dir/prompts.txt"
  batch=$("$generate" --ckpt "$ckpt" --prompts "$dir/prompts.txt" $flags 2>"$dir/err")
  if [ "$batch" != "$expected" ]; then echo "FAIL ($flags): batch '$batch', one at a time '$expected'"; exit 1; fi
  grep -q "^batch 3 | prefill 3 x 8 tokens" "$dir/err" || { echo "FAIL: latency line: $(cat "$dir/err")"; exit 1; }
  two=$("${mpiexec[@]}" -n 2 "$generate" --ckpt "$ckpt" --prompts "$dir/prompts.txt" --mesh tensor=2 $flags 2>/dev/null)
  if [ "$two" != "$batch" ]; then echo "FAIL ($flags): tensor=2 '$two', one process '$batch'"; exit 1; fi
  echo "ok ($flags): the batch of 3 equals each prompt alone, on one process and on tensor=2"
done

# Past the context (16 positions): 30 new tokens after a 6-token prompt.
"$generate" --ckpt "$ckpt" --prompt "12+34=" --max-new 30 --sliding-window > "$dir/long" 2>"$dir/err"
bytes=$(wc -c < "$dir/long")
[ "$bytes" -eq 37 ] || { echo "FAIL: --sliding-window wrote $bytes bytes, expected 6 + 30 + newline"; exit 1; }
grep -q "window slides" "$dir/err" || { echo "FAIL: no window slide reported: $(cat "$dir/err")"; exit 1; }
"$generate" --ckpt "$ckpt" --prompt "12+34=" --max-new 10 > "$dir/short" 2>/dev/null
if [ "$(head -c 16 "$dir/long")" != "$(head -c 16 "$dir/short")" ]; then
  echo "FAIL: the sliding window changed the tokens before its first slide"; exit 1
fi
echo "ok: --sliding-window wrote 30 tokens past a 16-position context, its first 10 as without it"
