#!/usr/bin/env bash
# local_profile.sh TRAIN_GPT: the first run on a machine measures it for the cost model and
# caches the profile; the next run uses the cache (and predicts); a corrupt cache or one
# from another build or thread count is measured again, never "not calibrated".
set -uo pipefail
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export SHARDLAB_LOCAL_PROFILE="$dir/local.profile" OMP_NUM_THREADS=1
failures=0
run() {  # run THREADS EXPECT: a 1-step run whose output must match EXPECT (extended regex)
  local out
  out=$("$train" --threads "$1" --model gpt-tiny --steps 1 --eval-every 0 --ckpt-dir "$dir/ckpt" \
        --metrics "$dir/m.jsonl" 2>&1)
  if ! grep -Eq -- "$2" <<<"$out"; then echo "FAIL: expected /$2/"; sed 's/^/    /' <<<"$out" | head -8; failures=$((failures + 1)); fi
  if grep -q "not calibrated" <<<"$out"; then echo "FAIL: a prediction without a profile"; failures=$((failures + 1)); fi
  grep -E "^(profile|predict)" <<<"$out"
}
run 1 "no profile at '$dir/local.profile': measuring this machine.*GEMM [0-9.]+ GFLOP/s.*cached in"
grep -q "^fingerprint = .*1 threads" "$SHARDLAB_LOCAL_PROFILE" || { echo "FAIL: no fingerprint cached"; failures=$((failures + 1)); }
run 1 "^predict [0-9.]+ ms per step: compute"
out=$("$train" --threads 1 --model gpt-tiny --steps 1 --eval-every 0 --ckpt-dir "$dir/ckpt" --metrics "$dir/m.jsonl" 2>&1)
grep -q "^profile" <<<"$out" && { echo "FAIL: a valid cached profile was measured again"; failures=$((failures + 1)); }
echo "flops_fp32 = fast" >> "$SHARDLAB_LOCAL_PROFILE"
run 1 "is corrupt \(.*flops_fp32.*\): measuring this machine.*cached in"
# Another machine or build (here: its fingerprint edited) is measured again.
sed -i 's/^fingerprint = .*/fingerprint = another machine/' "$SHARDLAB_LOCAL_PROFILE"
run 1 "measured on another machine, build or thread count: measuring this machine"
grep -q "^fingerprint = .*1 threads" "$SHARDLAB_LOCAL_PROFILE" || { echo "FAIL: the new fingerprint was not cached"; failures=$((failures + 1)); }
# Two threads per rank keep a profile of their own beside it.
run 2 "no profile at '$SHARDLAB_LOCAL_PROFILE.2threads': measuring"
run 1 "^predict [0-9.]+ ms per step: compute"
[ $failures = 0 ] && echo "ok: measured when missing, corrupt or stale; reused when valid"
[ $failures = 0 ]
