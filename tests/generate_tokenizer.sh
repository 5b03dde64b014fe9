#!/usr/bin/env bash
# generate_tokenizer.sh PREPARE_DATA TRAIN_GPT GENERATE: the paths a user takes with a
# tokenizer. The reference's vocabulary (tests/bpe_reference.py) tokenizes a corpus with
# prepare_data, train_gpt trains a tiny model on the shards, and generate --tokenizer
# prints text: the prompt, then the model's greedy continuation. train_gpt --tokenizer on
# the text file itself takes the tokenizer's vocabulary, says so, and its model generates
# with the tokenizer. Checked on generate's output:
# --stop TEXT ends the text just before the stop's first occurrence; --top-p 1e-6 keeps
# only the most likely token, so it samples the greedy text; <|endoftext|> as --stop is a
# stop token. Refused: either model without --tokenizer, a tokenizer with more ids than the
# model's vocabulary, --top-p 0, train_gpt --tokenizer on the arithmetic task.
set -uo pipefail
prepare=$1 train=$2 generate=$3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

/usr/bin/python3 "$here/bpe_reference.py" "$dir/vocab" || { echo "FAIL: bpe_reference.py (needs python3-regex)"; exit 1; }
tok=$dir/vocab/gpt2_strings.json
python3 -c "
import random
random.seed(1)
w = ['the', 'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'dog', \"It's\", 'a', 'day', '.']
print('\n'.join(' '.join(random.choice(w) for _ in range(10)) for _ in range(3000)))" > "$dir/corpus.txt"
"$prepare" --tokenizer "$tok" --out "$dir/shards/c" --shard-tokens 64k "$dir/corpus.txt" > /dev/null 2>&1 ||
  fail "prepare_data exited $?"
"$train" --threads 1 --model gpt-tiny --vocab 557 --data "$dir/shards/c_train_*.bin" --val-data "$dir/shards/c_val_000000.bin" \
  --steps 60 --eval-every 0 --eval-batches 1 --ckpt-dir "$dir/ckpt" > "$dir/train.log" 2>&1 || { fail "train_gpt:"; tail -5 "$dir/train.log"; }
ckpt=$dir/ckpt/ckpt_000060.h5
# The text encoded at load.
"$train" --threads 1 --model gpt-tiny --tokenizer "$tok" --data "$dir/corpus.txt" --steps 2 --eval-every 0 \
  --eval-batches 1 --ckpt-dir "$dir/text" > "$dir/text.log" 2>&1 || { fail "train_gpt --tokenizer:"; tail -5 "$dir/text.log"; }
grep -q "^model .* V=557 " "$dir/text.log" || fail "train_gpt --tokenizer did not take the vocabulary 557: $(grep ^model "$dir/text.log")"
grep -q "^data .*corpus.txt, tokenizer $tok (" "$dir/text.log" || fail "data line: $(grep ^data "$dir/text.log")"
"$generate" --ckpt "$dir/text/ckpt_000002.h5" --prompt "the" --max-new 4 > /dev/null 2> "$dir/err" &&
  fail "a model trained with --tokenizer ran without it"
grep -q "trained on text encoded by --tokenizer $tok; pass --tokenizer" "$dir/err" || fail "refusal: $(cat "$dir/err")"
"$generate" --ckpt "$dir/text/ckpt_000002.h5" --tokenizer "$tok" --prompt "the" --max-new 4 > "$dir/out" 2> "$dir/err" ||
  { fail "generate on the --tokenizer model:"; cat "$dir/err"; }
grep -q "^the" "$dir/out" || fail "no continuation: $(cat "$dir/out")"
"$train" --tokenizer "$tok" --steps 1 > /dev/null 2> "$dir/err" && fail "--tokenizer with the arithmetic task ran"
grep -q "tokenizer needs text --data files" "$dir/err" || fail "arithmetic refusal: $(cat "$dir/err")"

gen() { "$generate" --ckpt "$ckpt" --tokenizer "$tok" --prompt "the quick" --max-new 12 "$@" 2> "$dir/err"; }
greedy=$(gen) || { fail "generate --tokenizer:"; cat "$dir/err"; }
case "$greedy" in
  "the quick"?*) ;;
  *) fail "generate did not print the prompt and a continuation: '$greedy'" ;;
esac
new=${greedy#the quick}
stop=${new:3:3}  # three characters from inside the continuation
expected="the quick${new%%"$stop"*}"
[ "$(gen --stop "$stop")" = "$expected" ] || fail "--stop '$stop' printed '$(gen --stop "$stop")', expected '$expected'"
[ "$(gen --temperature 1 --top-p 1e-6 --seed 9)" = "$greedy" ] || fail "--top-p 1e-6 did not sample the greedy text"
[ "$(gen --stop "<|endoftext|>")" = "$greedy" ] || fail "--stop <|endoftext|> changed a text without it"

"$generate" --ckpt "$ckpt" --prompt "the" --max-new 4 > "$dir/out" 2> "$dir/err" && fail "a token-shard model ran without --tokenizer"
grep -q "generate has no --tokenizer.*pass --tokenizer" "$dir/err" || fail "refusal without --tokenizer: $(cat "$dir/err")"
"$train" --threads 1 --model gpt-tiny --vocab 300 --data "$dir/corpus.txt" --steps 1 --eval-every 0 \
  --eval-batches 1 --ckpt-dir "$dir/small" > /dev/null 2>&1 || fail "training a vocabulary-300 model"
"$generate" --ckpt "$dir/small/ckpt_000001.h5" --tokenizer "$tok" --prompt "the" --max-new 4 > /dev/null 2> "$dir/err" &&
  fail "a tokenizer of 557 ids ran a vocabulary-300 model"
grep -q "tokenizer has 557 token ids but checkpoint .* has a vocabulary of 300" "$dir/err" ||
  fail "refusal of a larger tokenizer: $(cat "$dir/err")"
gen --top-p 0 > /dev/null && fail "--top-p 0 accepted"
grep -q "top-p must be above 0 and at most 1, got 0" "$dir/err" || fail "--top-p 0: $(cat "$dir/err")"

[ $failures = 0 ] && echo "generate_tokenizer.sh: prompt '$greedy', stops, top-p and refusals as expected"
exit $((failures > 0))
