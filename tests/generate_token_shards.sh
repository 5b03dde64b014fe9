#!/usr/bin/env bash
# generate_token_shards.sh TRAIN_GPT GENERATE: without --tokenizer generate refuses a
# checkpoint trained on llm.c token shards -- one line naming the checkpoint's data and the
# fix, exit 1, no text -- and still decodes one trained on a text file (bytes are tokens).
set -uo pipefail
train=$1 generate=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
python3 - "$dir/shard.bin" <<'PY'
import struct, sys
tokens = [(7 * i) % 300 for i in range(4096)]   # ids past 255: not bytes
header = [20240520, 1, len(tokens)] + [0] * 253
open(sys.argv[1], "wb").write(struct.pack("<256i", *header) + struct.pack("<%dH" % len(tokens), *tokens))
PY
for i in $(seq 200); do echo "the quick brown fox $i"; done > "$dir/text.txt"
train_on() {  # train_on DATA VOCAB NAME: a 1-step gpt-tiny checkpoint in $dir/NAME
  "$train" --threads 1 --model gpt-tiny --vocab "$2" --data "$1" --steps 1 --eval-every 0 --eval-batches 1 \
    --ckpt-dir "$dir/$3" > "$dir/$3.log" 2>&1 || { fail "training on $1:"; tail -5 "$dir/$3.log"; }
}
train_on "$dir/shard.bin" 300 shards
train_on "$dir/text.txt" 256 text

"$generate" --ckpt "$dir/shards/ckpt_000001.h5" --prompt "hello" --max-new 4 > "$dir/out" 2> "$dir/err"
rc=$?
[ $rc = 1 ] || fail "generate on a token-shard model exited $rc, not 1"
[ -s "$dir/out" ] && fail "generate printed text for a token-shard model: $(cat "$dir/out")"
grep -q "trained on llm.c token shards (--data $dir/shard.bin), but generate has no --tokenizer.*pass --tokenizer" "$dir/err" ||
  { fail "the refusal does not name the data and the fix:"; cat "$dir/err"; }

"$generate" --ckpt "$dir/text/ckpt_000001.h5" --prompt "the" --max-new 4 > "$dir/out" 2> "$dir/err" ||
  { fail "generate on a text-file model:"; cat "$dir/err"; }
grep -q "^the" "$dir/out" || fail "no continuation of the prompt: $(cat "$dir/out")"

[ $failures = 0 ] && echo "ok: a token-shard model refused with its data named; a text model decoded"
[ $failures = 0 ]
