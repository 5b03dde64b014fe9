#!/usr/bin/env bash
# local_profile.sh TRAIN_GPT SHARDLAB_PLAN BENCH_COLLECTIVES MPIEXEC...: one `local` profile
# in the per-user cache ($XDG_CACHE_HOME/shardlab, else ~/.cache/shardlab), never the
# working directory. The first run measures the machine and caches it; the next uses the
# cache (and predicts); a corrupt cache, one from another build, or one without figures for
# the run's thread count is measured again -- in the same file, keeping the link.<axis>
# lines and the other thread counts' figures -- never "not calibrated". Once a thread count
# is in the file, runs with it never measure again, whichever count was measured last. What `shardlab-plan calibrate` and `bench_collectives --write-links local`
# write is the file train_gpt reads, and train_gpt takes it as its own.
set -uo pipefail
train=$1 plan=$2 bench=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/work" && cd "$dir/work" || exit 1
unset SHARDLAB_LOCAL_PROFILE
export XDG_CACHE_HOME="$dir/cache" OMP_NUM_THREADS=1
profile=$dir/cache/shardlab/local.profile
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
train_once() { "$train" --threads "$1" --model gpt-tiny --steps 1 --eval-every 0 --ckpt-dir "$dir/ckpt" --metrics "$dir/m.jsonl" 2>&1; }
run() {  # run THREADS EXPECT: a 1-step run whose output must match EXPECT (extended regex)
  local out
  out=$(train_once "$1")
  if ! grep -Eq -- "$2" <<<"$out"; then fail "expected /$2/"; sed 's/^/    /' <<<"$out" | head -8; fi
  if grep -q "not calibrated" <<<"$out"; then fail "a prediction without a profile"; fi
  grep -E "^(profile|predict)" <<<"$out"
}
reused() {  # reused THREADS WHY: the cached profile is taken as it is, not measured again
  grep -q "^profile" <<<"$(train_once "$1")" && fail "$2: the cached profile was measured again"
}
has() { grep -Eq -- "$1" "$profile" || fail "the profile lacks /$1/"; }

run 1 "no profile at '$profile': measuring this machine.*GEMM [0-9.]+ GFLOP/s.*cached in"
has "^fingerprint = .*1 threads"
run 1 "^predict [0-9.]+ ms per step: compute"
reused 1 "a valid profile"
echo "flops_fp32 = fast" >> "$profile"
run 1 "is corrupt \(.*flops_fp32.*\): measuring this machine.*cached in"
# Another machine or build (here: its fingerprint edited) is measured again.
sed -i 's/^fingerprint = .*/fingerprint = another machine/' "$profile"
run 1 "measured on another machine or build: measuring this machine"
has "^fingerprint = .*1 threads"
# Another thread count: the same file, measured again, the per-axis links users add kept,
# and the figures of 1 thread too; after that neither count measures again.
printf 'link.tensor.bandwidth = 2e9\nlink.tensor.latency = 5e-6\n' >> "$profile"
run 2 "'$profile' holds figures for 1 threads per rank, this run has 2: measuring.*kept link.tensor, the figures for 1 thread from it"
has "^fingerprint = .*2 threads"
has "^link.tensor.bandwidth = 2000000000$"
has "^threads.1.flops_fp32 = [0-9.e+]+$"
reused 1 "1 thread, from the threads.1 lines"
reused 2 "2 threads, the latest measurement"
reused 1 "1 thread again"
# A thread count's figures that cannot be read make the file corrupt, not silently unused.
cp "$profile" "$dir/good.profile"
echo "threads.4.flops_fp32 = many" >> "$profile"
run 1 "is corrupt \(.*threads.4.flops_fp32.*\): measuring"
cp "$dir/good.profile" "$profile"
[ "$(ls "$dir/cache/shardlab")" = local.profile ] || fail "other profile files: $(ls "$dir/cache/shardlab")"

# shardlab-plan calibrate writes that file, fingerprinted for the thread count it is given,
# keeping the links and the other thread counts; train_gpt then uses it as it is.
out=$("$plan" calibrate --threads 1 --seconds 0.05 2>&1)
grep -q "^measured with 1 threads per rank" <<<"$out" && grep -q "^kept link.tensor, the figures for 2 threads from the file" <<<"$out" &&
  grep -qx "wrote $profile" <<<"$out" || { fail "calibrate said:"; sed 's/^/    /' <<<"$out"; }
has "^fingerprint = .*1 threads"
has "^link.tensor.bandwidth = 2000000000$"
has "^threads.2.flops_fp32 = [0-9.e+]+$"
reused 1 "calibrate's profile"
reused 2 "calibrate kept 2 threads' figures"
# bench_collectives measures per-axis links into it; train_gpt still takes it as its own.
"$@" -n 2 "$bench" --mesh data=2 --rounds 1 --write-links local > "$dir/bench.log" 2>&1 || { fail "write-links:"; cat "$dir/bench.log"; }
has "^link.data.bandwidth = [0-9.e+]+$"
has "^link.tensor.bandwidth = 2000000000$"
reused 1 "bench_collectives' profile"
# Without XDG_CACHE_HOME: ~/.cache/shardlab. Nothing is ever written in the working directory.
out=$(env -u XDG_CACHE_HOME HOME="$dir/home" "$plan" calibrate --seconds 0.05 2>&1)
grep -qx "wrote $dir/home/.cache/shardlab/local.profile" <<<"$out" || { fail "without XDG_CACHE_HOME:"; sed 's/^/    /' <<<"$out"; }
[ -z "$(ls -A "$dir/work")" ] || fail "files in the working directory: $(ls -A "$dir/work")"

[ $failures = 0 ] && echo "ok: one profile in the user's cache: measured when missing, corrupt, stale or without the run's thread count; reused when valid; links, thread counts and calibrate's figures kept"
[ $failures = 0 ]
