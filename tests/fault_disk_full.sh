#!/usr/bin/env bash
# fault_disk_full.sh TRAIN_GPT MPIEXEC... : a full disk is a clear error, never a crash.
# Needs to mount a tmpfs (root); skipped (exit 77) where it cannot.
#
# 1. Checkpoints on a 200 KiB tmpfs that holds one checkpoint but not two (1 rank, and 2
#    ranks with ZeRO-3): the write that does not fit ends the job with exit 1 and one
#    message naming the file and "No space left on device" -- no segfault in HDF5's
#    teardown (it was exit 139), no MPI_ABORT; the previous checkpoint is intact (it
#    resumes elsewhere) and no .tmp is left.
#    The same under --ckpt-async, where the write that fails is the background thread's.
# 2. --metrics on a full 4 KiB tmpfs: one warning naming the file, training goes on (exit 0).
# 3. --trace on a full tmpfs: exit 1 on every rank with one message, no partial file.
set -uo pipefail
train=$1; shift
mpiexec=("$@")
source "$(dirname "$0")/fault_common.sh"  # dir; fail, checkpoints
mounts=()
trap 'for m in "${mounts[@]}"; do umount "$m"; done; rm -rf "$dir"' EXIT
tmpfs() {  # tmpfs DIR SIZE: a fresh tmpfs of SIZE at DIR
  mkdir -p "$1" && mount -t tmpfs -o "size=$2" tmpfs "$1" 2> /dev/null && mounts+=("$1")
}
tmpfs "$dir/probe" 4k || { echo "cannot mount a tmpfs here (needs root): skipped"; exit 77; }
common=(--model gpt-tiny --steps 4 --warmup 0 --eval-every 0 --eval-batches 1 --eval-problems 0 --log-every 100
        --threads 1 --probe=false --ckpt-every 2)

clean_error() {  # clean_error NAME OUT RC PATTERN: exit 1, one message matching PATTERN, no crash
  local name=$1 out=$2 rc=$3 pattern=$4
  [ "$rc" = 1 ] || fail "$name: exit $rc, not 1"
  [ "$(grep -c "error:" "$out")" = 1 ] || fail "$name: not exactly one error message"
  grep -q "^error: .*$pattern" "$out" || fail "$name: the message does not match '$pattern'"
  grep -qi "segmentation\|MPI_ABORT\|signal" "$out" && fail "$name: a crash or an abort"
}

checkpoint_disk_full() {  # checkpoint_disk_full NAME RANKS ARGS...
  local name=$1 n=$2; shift 2
  local run="$dir/$name"
  tmpfs "$run" 200k || { fail "$name: mount"; return; }
  "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" "$@" --ckpt-dir "$run" --metrics "$dir/$name.jsonl" > "$run.out" 2>&1
  local rc=$?
  clean_error "$name" "$run.out" $rc "ckpt_000004.h5.tmp.*No space left on device"
  [ "$(checkpoints "$run")" = "$run/ckpt_000002.h5" ] || fail "$name: the step-2 checkpoint is not the one kept"
  ls "$run"/*.tmp > /dev/null 2>&1 && fail "$name: a .tmp file is left"
  mkdir -p "$dir/$name-elsewhere"
  "${mpiexec[@]}" -n "$n" "$train" "${common[@]}" "$@" --resume "$run/ckpt_000002.h5" --ckpt-dir "$dir/$name-elsewhere" \
    > "$run-resumed.out" 2>&1 || fail "$name: the kept checkpoint does not resume"
  echo "$name: $(grep -m1 -o "cannot [^:]*" "$run.out") ... -> exit $rc; ckpt_000002.h5 kept and resumes"
}
checkpoint_disk_full "1 rank" 1
checkpoint_disk_full "2 ranks ZeRO-3" 2 --mesh data=2 --zero 3
# The write that does not fit runs in the background thread: the same one message on every rank.
checkpoint_disk_full "1 rank async" 1 --ckpt-async
checkpoint_disk_full "2 ranks ZeRO-3 async" 2 --mesh data=2 --zero 3 --ckpt-async

tmpfs "$dir/small" 4k
"$train" "${common[@]}" --steps 40 --ckpt-every 0 --log-every 1000 --metrics "$dir/small/metrics.jsonl" \
  --ckpt-dir "$dir/metrics-ckpt" > "$dir/metrics.out" 2>&1
rc=$?
[ $rc = 0 ] || fail "metrics on a full disk: exit $rc, not 0"
[ "$(grep -c "^warning: cannot write metrics file $dir/small/metrics.jsonl at step [0-9]*: No space left on device" \
  "$dir/metrics.out")" = 1 ] || fail "metrics on a full disk: not one warning"
echo "metrics on a full disk: $(grep -o "at step [0-9]*" "$dir/metrics.out"): one warning, trained to the end (exit $rc)"

tmpfs "$dir/tiny" 4k
"${mpiexec[@]}" -n 2 "$train" "${common[@]}" --mesh data=2 --steps 30 --ckpt-every 0 --trace "$dir/tiny/trace.json" \
  --ckpt-dir "$dir/trace-ckpt" > "$dir/trace.out" 2>&1
rc=$?
clean_error "trace on a full disk" "$dir/trace.out" $rc "trace file '$dir/tiny/trace.json': No space left on device"
[ -e "$dir/tiny/trace.json" ] && fail "trace on a full disk: the partial file is left"
echo "trace on a full disk, 2 ranks: exit $rc, one message, no partial file"

[ $failures = 0 ] || { echo "$failures failures"; exit 1; }
echo "ok: full disks end the job with one clear message, the previous checkpoint kept"
