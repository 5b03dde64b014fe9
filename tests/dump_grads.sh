#!/usr/bin/env bash
# dump_grads.sh TRAIN_GPT CKPT_COMPARE MPIEXEC...: --dump-grads writes the first step's
# gradients unsharded under the checkpoint's names, the same in every layout as in one
# process (gradients and the weights beside them), and only for the first step.
set -euo pipefail
train=$1; compare=$2; shift 2
mpiexec=("$@")
export OMP_NUM_THREADS=1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
common=(--model gpt-tiny --heads 4 --kv-heads 4 --context 32 --batch 8 --steps 2 --warmup 1 --eval-every 0
        --eval-batches 1 --eval-problems 0 --log-every 1 --threads 1 --probe=false --metrics "")
"$train" "${common[@]}" --ckpt-dir "$dir/one" --dump-grads "$dir/one.h5" > "$dir/one.log"
grep -q "gradients of this step .* written to $dir/one.h5" "$dir/one.log" || { echo "FAIL: no report"; cat "$dir/one.log"; exit 1; }
for layout in "--mesh data=2" "--mesh data=2 --zero 3" "--mesh tensor=2" "--mesh pipe=2 --grad-accum 2" \
              "--mesh data=2 --zero 2 --grad-accum 2"; do
  name=$(tr -c 'a-z0-9' '_' <<< "$layout")
  "${mpiexec[@]}" -n 2 "$train" "${common[@]}" $layout --ckpt-dir "$dir/$name" --dump-grads "$dir/$name.h5" > /dev/null
  "$compare" "$dir/one.h5" "$dir/$name.h5" optim/grad/ 1e-4 || { echo "FAIL: gradients of $layout"; exit 1; }
  "$compare" "$dir/one.h5" "$dir/$name.h5" params/ 0 || { echo "FAIL: weights of $layout"; exit 1; }
  echo "ok ($layout): the dumped gradients equal one process's"
done
# The dump is the first step's: after a step the weights have moved, so a second step's
# gradients would differ from the first's.
"$train" "${common[@]}" --steps 1 --ckpt-dir "$dir/first" > /dev/null
"$compare" "$dir/one.h5" "$dir/first/ckpt_000001.h5" params/ 0 > /dev/null 2>&1 &&
  { echo "FAIL: the dump holds the weights after the update, not the ones its gradients belong to"; exit 1; }
echo "ok: the dump holds the weights before the first update"
