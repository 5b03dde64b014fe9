#!/usr/bin/env bash
# prepare_data.sh PREPARE_DATA: a small corpus through prepare_data with the reference's
# vocabulary (tests/bpe_reference.py): the val shard comes first and ends at a line end
# near --val-fraction, shards hold --shard-tokens tokens, and the shards read back and
# decoded (in Python, from the vocabulary's own bytes) give every file's text, each after
# <|endoftext|>. A tokenizer of more than 65536 ids writes LLaMA 3's uint32 form (magic
# 20240801, version 7), which decodes too and which train_gpt (TRAIN_GPT, the optional
# second argument) trains on. A file that is no tokenizer is refused with one clear line.
set -uo pipefail
prepare=$1 train=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

/usr/bin/python3 "$here/bpe_reference.py" "$dir/vocab" || { echo "FAIL: bpe_reference.py (needs python3-regex)"; exit 1; }
python3 - "$dir" <<'PY'
import random, sys
random.seed(5)
words = ["the", "quick", "brown", "fox", "It's", "naïve", "12345", "!!", "Привет", "👋", "<|endoftext|>"]
for name, lines in (("a.txt", 300), ("b.txt", 40)):
    with open(f"{sys.argv[1]}/{name}", "w") as f:
        for _ in range(lines):
            f.write(" ".join(random.choice(words) for _ in range(random.randint(0, 12))) + "\n")
PY
"$prepare" --tokenizer "$dir/vocab/gpt2_strings.json" --out "$dir/out/corpus" --shard-tokens 2k \
  --val-fraction 0.25 "$dir/a.txt" "$dir/b.txt" > "$dir/stdout" 2> "$dir/stderr" || { fail "prepare_data exited $?"; cat "$dir/stderr"; }
grep -q "100.0% .* MB/s .* tokens/s" "$dir/stderr" || fail "no finished progress bar on stderr: $(tr '\r' '\n' < "$dir/stderr" | tail -2)"
grep -q "^prepare_data: .* MB/s.*val [0-9]* tokens in 1 shard(s), train [0-9]* tokens in [0-9]* shard(s); each document starts with <|endoftext|>" \
  "$dir/stdout" || fail "summary: $(cat "$dir/stdout")"
python3 - "$dir" <<'PY' || fail "shards do not decode to the corpus"
import base64, glob, os, struct, sys
d = sys.argv[1]
tokens = [base64.b64decode(line.split()[0]) for line in open(f"{d}/vocab/llama3.tiktoken")]
tokens.append(b"<|endoftext|>")  # id 556, the tokenizer.json's added token
names = sorted((os.path.basename(p) for p in glob.glob(f"{d}/out/*.bin")), key=lambda n: n[-10:])  # by index
assert names[0] == "corpus_val_000000.bin", names
assert all(n == f"corpus_train_{i:06d}.bin" for i, n in enumerate(names) if i > 0), names
ids, counts = [], []
for n in names:
    raw = open(f"{d}/out/{n}", "rb").read()
    header = struct.unpack("<256i", raw[:1024])
    assert header[:2] == (20240520, 1), header[:3]
    assert len(raw) == 1024 + 2 * header[2], n
    ids += struct.unpack(f"<{header[2]}H", raw[1024:])
    counts.append(header[2])
assert all(c == 2048 for c in counts[1:-1]), counts  # full train shards, a shorter last one
text = b"".join(tokens[i] for i in ids)
a, b = open(f"{d}/a.txt", "rb").read(), open(f"{d}/b.txt", "rb").read()
assert text == b"<|endoftext|>" + a + b"<|endoftext|>" + b, "decoded text differs"
val = b"".join(tokens[i] for i in ids[:counts[0]])
assert val.endswith(b"\n") and abs(len(val) - 0.25 * (len(a) + len(b))) < 200, (len(val), len(a) + len(b))
print(f"prepare_data.sh: {len(names)} shards, {len(ids)} tokens decode to the corpus")
PY

# LLaMA 3's 256 specials after 65281 ranks: 65537 ids, one too many for uint16 shards.
python3 - "$dir/big.tiktoken" <<'PY'
import base64, sys
with open(sys.argv[1], "w") as f:
    toks = [bytes([b]) for b in range(256)] + [bytes([a, b]) for a in range(256) for b in range(256)][:65025]
    f.writelines(base64.b64encode(t).decode() + f" {i}\n" for i, t in enumerate(toks))
PY
expect_refusal() {  # expect_refusal PATTERN ARGS...: exit 1, one error line matching PATTERN, no shard
  local pattern=$1
  shift
  "$prepare" --out "$dir/refused/x" "$@" > /dev/null 2> "$dir/err"
  local rc=$?
  [ $rc = 1 ] || fail "prepare_data $* exited $rc, not 1"
  grep -q "$pattern" "$dir/err" || fail "prepare_data $*: no '$pattern' in: $(cat "$dir/err")"
  [ -e "$dir/refused" ] && fail "prepare_data $* wrote output"
}
expect_refusal "tokenizer .*a.txt line 1 .* a tiktoken file has lines" --tokenizer "$dir/a.txt" "$dir/a.txt"
expect_refusal "val-fraction must be at least 0 and below 1, got 1" --tokenizer "$dir/vocab/gpt2_strings.json" \
  --val-fraction 1 "$dir/a.txt"
expect_refusal "input '.*nothing_\*.txt' matches no file" --tokenizer "$dir/vocab/gpt2_strings.json" "$dir/nothing_*.txt"

"$prepare" --tokenizer "$dir/big.tiktoken" --out "$dir/wide/c" --val-fraction 0 "$dir/a.txt" > /dev/null 2> "$dir/err" ||
  { fail "prepare_data with 65537 ids exited $?"; cat "$dir/err"; }
python3 - "$dir" <<'PY' || fail "the uint32 shard does not decode to the corpus"
import base64, glob, struct, sys
d = sys.argv[1]
tokens = [base64.b64decode(line.split()[0]) for line in open(f"{d}/big.tiktoken")]
shards = glob.glob(f"{d}/wide/c_train_*.bin")
assert len(shards) == 1, shards
raw = open(shards[0], "rb").read()
header = struct.unpack("<256i", raw[:1024])
assert header[:2] == (20240801, 7) and len(raw) == 1024 + 4 * header[2], header[:3]
ids = struct.unpack(f"<{header[2]}I", raw[1024:])
assert ids[0] == len(tokens), ids[:3]  # <|begin_of_text|>, the first special after the ranks
text = b"<|begin_of_text|>" + b"".join(tokens[i] for i in ids[1:])
assert text == b"<|begin_of_text|>" + open(f"{d}/a.txt", "rb").read(), "decoded text differs"
PY
if [ -n "$train" ]; then
  "$train" --threads 1 --model gpt-tiny --context 32 --batch 2 --tokenizer "$dir/big.tiktoken" --data "$dir/wide/c_train_*.bin" \
    --steps 1 --eval-every 0 --eval-batches 1 --ckpt-dir "$dir/wide_run" > "$dir/wide.log" 2>&1 ||
    { fail "train_gpt on uint32 shards:"; tail -3 "$dir/wide.log"; }
  grep -q "^data .*uint32 tokens" "$dir/wide.log" || fail "data line: $(grep '^data' "$dir/wide.log")"
  grep -q "V=65537" "$dir/wide.log" || fail "model line: $(grep '^model' "$dir/wide.log")"
fi

[ $failures = 0 ] && echo "prepare_data.sh: all checks passed"
exit $((failures > 0))
