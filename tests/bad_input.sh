#!/usr/bin/env bash
# bad_input.sh BIN_DIR MPIEXEC... : every program, given each class of invalid input, at
# 1 rank and (the MPI programs) at 2 ranks, exits non-zero within 10 s with a message that
# names the flag or file and the fix -- no hang, no crash, no core dump, no sanitizer
# report, no internal error. One table row per case:
#
#   class | program | arguments | what the message must match (extended regex)
#
# Classes: non-numeric, zero, negative, huge, overflow, contradictory, unwritable path,
# wrong file type, corrupt file. Prints one line per run and a summary; exits 1 on a failure.
set -uo pipefail
bin=$1; shift
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
ulimit -c 0

# Input files of the wrong kind.
printf 'not a checkpoint at all' > "$dir/garbage.h5"
head -c 600 /dev/urandom > "$dir/random.h5"
printf '\211HDF\r\n\032\n and then nothing' > "$dir/truncated.h5"
printf 'abc' > "$dir/short.bin"
python3 - "$dir/badmagic.bin" <<'EOF'
import struct, sys
header = [12345, 1, 4] + [0] * 253   # wrong magic
open(sys.argv[1], "wb").write(struct.pack("<256i", *header) + struct.pack("<4H", 1, 2, 3, 4))
EOF
python3 - "$dir/overcount.bin" <<'EOF'
import struct, sys
header = [20240520, 1, 1000] + [0] * 253   # says 1000 tokens, holds 4
open(sys.argv[1], "wb").write(struct.pack("<256i", *header) + struct.pack("<4H", 1, 2, 3, 4))
EOF

T="train_gpt --threads 1 --ckpt-dir $dir/ckpt --metrics $dir/m.jsonl"
G="generate"
B="bench_collectives"
P="shardlab-plan"
cases=(
  "non-numeric|$T|--steps abc|--steps 'abc' is not a value"
  "non-numeric|$T|--lr fast|--lr 'fast' is not a value"
  "non-numeric|$G|--ckpt $dir/garbage.h5 --max-new many|--max-new 'many' is not a value"
  "non-numeric|$B|--iters x|--iters 'x' is not a value"
  "non-numeric|$B|--min-bytes abc|--min-bytes 'abc' is not a size"
  "non-numeric|$P|train --model gpt2-124m --chips abc --batch 4M|--chips 'abc' is not a value"
  "zero|$T|--batch 0|--batch must be positive"
  "zero|$T|--steps 0|--steps must be positive"
  "zero|$G|--ckpt $dir/garbage.h5 --max-new 0|--max-new must be positive"
  "zero|$B|--min-bytes 0|--min-bytes must be positive"
  "zero|$P|train --model gpt2-124m --chips 0 --batch 4M|--chips"
  "negative|$T|--grad-clip -1|--grad-clip"
  "negative|$T|--eval-batches -2|--eval-batches"
  "negative|$G|--ckpt $dir/garbage.h5 --temperature -1|--temperature"
  "negative|$G|--ckpt $dir/garbage.h5 --top-k -3|--top-k"
  "negative|$B|--iters -5|--iters"
  "negative|$B|--collective-timeout -1|--collective-timeout"
  "negative|$G|--ckpt $dir/garbage.h5 --collective-timeout -1|--collective-timeout"
  "negative|$T|--collective-timeout -3|--collective-timeout"
  "negative|$P|train --model gpt2-124m --chips 8 --batch 4M --efficiency -1|--efficiency"
  "huge|$T|--d-model 1000000 --vocab 1000000|needs at least .* GiB per rank .* shrink the model"
  "huge|$T|--batch 100000000 --model gpt-tiny|--batch|needs at least"
  "huge|$B|--max-bytes 1e15|--max-bytes"
  "overflow|$T|--steps 99999999999999999999|--steps '99999999999999999999' is not a value"
  "overflow|$T|--layers 9999999999999|--layers"
  "overflow|$P|train --model gpt2-124m --chips 99999999999999999999 --batch 4M|--chips"
  "contradictory|$T|--batch 6 --grad-accum 4|--batch 6 is not divisible by --grad-accum 4"
  "contradictory|$T|--tp-overlap|sequence parallelism"
  "contradictory|$T|--lr 1e-3 --min-lr 1e-2|--min-lr"
  "contradictory|$T|--model gpt-tiny --top-k 2|--top-k applies to mixture-of-experts models"
  "contradictory|$B|--min-bytes 64M --max-bytes 1M|--min-bytes .*--max-bytes"
  "unwritable path|$T|--ckpt-dir /proc/shardlab/ckpt|--ckpt-dir '/proc/shardlab/ckpt' cannot be written"
  "unwritable path|$T|--metrics /proc/shardlab/m.jsonl|--metrics"
  "unwritable path|$T|--trace /proc/shardlab/t.json|--trace"
  "unwritable path|$B|--csv /proc/shardlab/c.csv|--csv"
  "wrong file type|$T|--data $dir|--data '$dir' is a directory"
  "wrong file type|$T|--resume $dir/garbage.h5|checkpoint '$dir/garbage.h5' is not a shardlab checkpoint"
  "wrong file type|$G|--ckpt $dir|$dir"
  "wrong file type|$G|--ckpt $dir/garbage.h5|not a shardlab checkpoint"
  "corrupt file|$T|--resume $dir/random.h5|$dir/random.h5"
  "corrupt file|$T|--resume $dir/truncated.h5|$dir/truncated.h5"
  "corrupt file|$G|--ckpt $dir/truncated.h5|$dir/truncated.h5"
  "corrupt file|$T|--data $dir/badmagic.bin|$dir/badmagic.bin"
  "corrupt file|$T|--data $dir/overcount.bin|$dir/overcount.bin"
  "corrupt file|$T|--data $dir/short.bin|$dir/short.bin"
)

runs=0
failures=0
check() {  # check CLASS RANKS REGEX COMMAND...
  local class=$1 ranks=$2 regex=$3; shift 3
  local start=$SECONDS out rc
  out=$(timeout 10 "$@" 2>&1); rc=$?
  local problem=""
  if [ $rc -eq 0 ]; then problem="exit 0"
  elif [ $rc -eq 124 ]; then problem="still running after 10 s (a hang)"
  elif [ $rc -ge 128 ]; then problem="killed by signal $((rc - 128)) (a crash)"
  elif ! grep -Eq -- "$regex" <<<"$out"; then problem="the message does not match /$regex/"
  elif grep -Eq "AddressSanitizer|runtime error:|internal error|terminate called|Segmentation|core dumped" <<<"$out"; then
    problem="a crash or internal error in the output"
  fi
  runs=$((runs + 1))
  if [ -n "$problem" ]; then
    failures=$((failures + 1))
    echo "FAIL [$class, $ranks rank(s)] ${*##*/}: $problem"
    sed 's/^/    /' <<<"$out" | head -6
  else
    printf 'ok   [%s, %s rank(s), exit %d, %d s] %s\n' "$class" "$ranks" "$rc" $((SECONDS - start)) \
      "$(grep -m1 -Eo -- "error: .{0,110}" <<<"$out")"
  fi
}

for row in "${cases[@]}"; do
  IFS='|' read -r class program args regex <<<"$row"
  read -ra prog <<<"$program"
  read -ra argv <<<"$args"
  prog[0]="$bin/${prog[0]}"
  check "$class" 1 "$regex" "${prog[@]}" "${argv[@]}"
  # The MPI programs again on 2 ranks: every rank refuses, the job ends.
  if [ "${program%% *}" != "$P" ]; then
    local_mesh=()
    [ "${program%% *}" = train_gpt ] && local_mesh=(--mesh data=2)  # a row's own --mesh comes later and wins
    check "$class" 2 "$regex" "${mpiexec[@]}" -n 2 "${prog[@]}" "${local_mesh[@]}" "${argv[@]}"
  fi
done
echo "$runs runs, $failures failures"
[ $failures = 0 ]
