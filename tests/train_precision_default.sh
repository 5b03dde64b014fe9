#!/usr/bin/env bash
# train_precision_default.sh TRAIN_GPT MPIEXEC...: --precision auto, train_gpt's default,
# resolves to bf16 exactly where the bf16 matmul path measured at start-up is oneDNN's
# bf16 kernels on every rank, and to fp32 elsewhere; the run header says which and why.
# SHARDLAB_BF16_MATMUL forces the measured path, so both outcomes run on any machine:
# - native on one rank: bf16, with the reason in the dtype line, and its checkpoint
#   records bf16 (never "auto");
# - rounded (a CPU whose bf16 runs on the fp32 units): fp32, saying why;
# - two ranks that disagree (one native, one rounded, an MPMD launch): both fp32 -- a rank
#   alone must not train in another precision than its peers -- and a rank pinned to bf16
#   beside one that measures: both bf16, with no collective one of them skips;
# - SHARDLAB_DEFAULT_PRECISION decides without measuring (the suite pins fp32 through it,
#   tests/CMakeLists.txt), and a bad value is a user error naming it, on every rank even
#   where only one rank has it;
# - --bf16-matmul without --precision bf16 is refused, naming auto.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/script_checks.sh"
train=$1; shift
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--model gpt-tiny --context 32 --batch 8 --steps 2 --warmup 1 --eval-every 0 --eval-batches 1
        --eval-problems 0 --threads 1 --metrics "")
unset SHARDLAB_DEFAULT_PRECISION
SHARDLAB_BF16_MATMUL=native "$train" "${common[@]}" --ckpt-dir "$dir/native" > "$dir/native.out"
grep -q '^dtype   bf16 compute.*bf16 by default (--precision auto): bf16 kernels' "$dir/native.out" ||
  fail "auto with the bf16 kernels measured did not train bf16: $(grep '^dtype' "$dir/native.out")"
grep -aq 'bf16' "$dir/native/ckpt_000002.h5" || fail "the auto run's checkpoint does not record bf16"
SHARDLAB_BF16_MATMUL=rounded "$train" "${common[@]}" --ckpt-dir "$dir/rounded" > "$dir/rounded.out"
grep -q '^dtype   fp32 compute.*fp32 by default (--precision auto): this CPU runs bf16 matmuls no faster' "$dir/rounded.out" ||
  fail "auto without the bf16 kernels did not train fp32, saying why: $(grep '^dtype' "$dir/rounded.out")"
"${mpiexec[@]}" -n 1 env SHARDLAB_BF16_MATMUL=native "$train" "${common[@]}" --mesh data=2 --ckpt-dir "$dir/mixed" : \
                -n 1 env SHARDLAB_BF16_MATMUL=rounded "$train" "${common[@]}" --mesh data=2 --ckpt-dir "$dir/mixed" \
                > "$dir/mixed.out"
grep -q "^dtype   fp32 compute.*another rank's CPU runs bf16 matmuls no faster" "$dir/mixed.out" ||
  fail "ranks that disagree did not both train fp32: $(grep '^dtype' "$dir/mixed.out")"
# One rank pinned to bf16, the other measuring the bf16 kernels: the pinned vote (bf16, its
# path still to measure) wins on both, and neither waits on a collective the other skipped.
"${mpiexec[@]}" -n 1 env SHARDLAB_DEFAULT_PRECISION=bf16 SHARDLAB_BF16_MATMUL=native "$train" "${common[@]}" \
                --mesh data=2 --ckpt-dir "$dir/pinned2" : \
                -n 1 env SHARDLAB_BF16_MATMUL=native "$train" "${common[@]}" --mesh data=2 --ckpt-dir "$dir/pinned2" \
                > "$dir/pinned2.out"
grep -q '^dtype   bf16 compute.*bf16 kernels forced.*bf16 by default: SHARDLAB_DEFAULT_PRECISION=bf16' "$dir/pinned2.out" ||
  fail "a pinned and a measuring rank did not agree on bf16: $(grep '^dtype' "$dir/pinned2.out")"
SHARDLAB_DEFAULT_PRECISION=bf16 SHARDLAB_BF16_MATMUL=rounded "$train" "${common[@]}" --ckpt-dir "$dir/pinned" > "$dir/pinned.out"
grep -q '^dtype   bf16 compute.*bf16 by default: SHARDLAB_DEFAULT_PRECISION=bf16' "$dir/pinned.out" ||
  fail "SHARDLAB_DEFAULT_PRECISION=bf16 did not decide: $(grep '^dtype' "$dir/pinned.out")"
SHARDLAB_DEFAULT_PRECISION=fp16 expect_error "SHARDLAB_DEFAULT_PRECISION" "$train" "${common[@]}" --ckpt-dir "$dir/bad"
# A bad value on one rank only: both ranks stop with an error naming it, neither hangs.
expect_error "another rank's SHARDLAB_DEFAULT_PRECISION is not fp32 or bf16" timeout 60 "${mpiexec[@]}" \
  -n 1 env SHARDLAB_DEFAULT_PRECISION=fp16 "$train" "${common[@]}" --mesh data=2 --ckpt-dir "$dir/bad2" : \
  -n 1 "$train" "${common[@]}" --mesh data=2 --ckpt-dir "$dir/bad2"
expect_error "--bf16-matmul native applies to --precision bf16, and this run's precision is auto" \
  "$train" "${common[@]}" --ckpt-dir "$dir/bad" --bf16-matmul native
echo "ok: --precision auto is bf16 exactly where every rank measured the bf16 kernels faster, fp32 elsewhere"
