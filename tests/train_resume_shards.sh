#!/usr/bin/env bash
# train_resume_shards.sh TRAIN_GPT MPIEXEC...: training on shuffled llm.c shards, a run
# resumed from the middle of a shuffled epoch, in the same or another layout, reads the
# rows the uninterrupted run reads. Three shards of 14 windows per epoch at T 32 and 4 rows
# a step: 10 steps cross two epoch boundaries and the checkpoint at step 5 sits 6 rows into
# epoch 1. Resumed with -np 1 and with tensor=2 the losses of steps 6-10 equal the
# uninterrupted run's bit for bit; with data=2 (each rank reading its 2 rows) within 1e-5
# relative (the gradients sum in another order). Reading the rows in any other order moves
# these losses by more than 1e-3 (checked on a --shuffle=false run), and a resume with
# another --seed is refused, naming the checkpoint's.
set -uo pipefail
train=$1; shift
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
python3 - "$dir" <<'PY'
import random, struct, sys
rnd = random.Random(5)
phrases = [[rnd.randrange(300) for _ in range(rnd.randrange(3, 9))] for _ in range(20)]
def shard(name, n):  # a learnable stream: phrases of ids below 300, in random order
    tokens = []
    while len(tokens) < n: tokens += phrases[rnd.randrange(20)]
    header = [20240520, 1, n] + [0] * 253
    open(sys.argv[1] + "/" + name, "wb").write(struct.pack("<256i", *header) + struct.pack("<%dH" % n, *tokens[:n]))
for i, n in enumerate([200, 150, 130]): shard("train_%03d.bin" % i, n)
shard("val_000.bin", 300)
PY
common=(--model gpt-tiny --heads 4 --kv-heads 4 --vocab 300 --context 32 --batch 4 --steps 10 --warmup 2
        --eval-every 0 --eval-batches 1 --log-every 100 --threads 1 --probe=false --data "$dir/train_*.bin" --val-data "$dir/val_000.bin")
run() {  # run NAME RANKS ARGS...: trains; metrics in $dir/NAME.jsonl
  local name=$1 ranks=$2; shift 2
  local launch=("$train")
  [ "$ranks" = 1 ] || launch=("${mpiexec[@]}" -n "$ranks" "$train")
  timeout 120 "${launch[@]}" "${common[@]}" --metrics "$dir/$name.jsonl" --ckpt-dir "$dir/$name" "$@" > "$dir/$name.out" 2>&1 ||
    { fail "the $name run:"; tail -3 "$dir/$name.out"; }
}
losses() { grep -o '"loss": [^,]*' "$1" | awk '{print $2}'; }
# worst FILE_A FILE_B: the largest relative difference of the losses of steps 6-10
worst() {
  paste <(losses "$1") <(losses "$2") |
    awk 'NR > 5 {d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > w) w = d; n++} END {if (n != 5) print 1; else printf "%.1e", w}'
}
run full 1 --ckpt-every 5
grep -q "^data .*train_\*.bin (3 llm.c shards mapped, 480 uint16 tokens, shuffled per epoch, seed 1234)" "$dir/full.out" ||
  fail "data line: $(grep '^data' "$dir/full.out")"
resume() {  # resume NAME RANKS ARGS...: from step 5 of the full run
  local name=$1; shift
  head -n 5 "$dir/full.jsonl" > "$dir/$name.jsonl"
  run "$name" "$@" --resume "$dir/full/ckpt_000005.h5"
}
resume same 1
resume tensor 2 --mesh tensor=2
resume data 2 --mesh data=2
for name in same tensor; do
  diff -q <(losses "$dir/full.jsonl") <(losses "$dir/$name.jsonl") > /dev/null ||
    fail "resumed ($name layout) losses differ from the uninterrupted run: $(paste -d' ' <(losses "$dir/full.jsonl") <(losses "$dir/$name.jsonl") | tr '\n' '|')"
done
w=$(worst "$dir/full.jsonl" "$dir/data.jsonl")
awk -v w="$w" 'BEGIN {exit !(w <= 1e-5)}' || fail "resumed under data=2, steps 6-10 differ by $w (relative)"
run ordered 1 --shuffle=false
w=$(worst "$dir/full.jsonl" "$dir/ordered.jsonl")
awk -v w="$w" 'BEGIN {exit !(w > 1e-3)}' || fail "rows in file order change steps 6-10 by only $w: the check could not see another order"

"$train" "${common[@]}" --seed 99 --ckpt-dir "$dir/seed" --resume "$dir/full/ckpt_000005.h5" > "$dir/seed.out" 2>&1 &&
  fail "a resume with another --seed was not refused"
grep -q "read with --shuffle=true --seed 1234, but this run has --shuffle=true --seed 99.*resume with --shuffle=true --seed 1234" \
  "$dir/seed.out" || fail "the refusal of another --seed: $(tail -2 "$dir/seed.out")"
[ $failures = 0 ] && echo "ok: resumed at step 5 (mid-epoch) with -np 1 and tensor=2 bit for bit, data=2 within 1e-5; another seed refused"
[ $failures = 0 ]
