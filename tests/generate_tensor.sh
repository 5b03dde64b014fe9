#!/usr/bin/env bash
# generate_tensor.sh GENERATE CKPT MPIEXEC...: decoding with the weights and KV cache split
# over tensor=2 produces the same tokens as one process, greedy and sampled.
set -euo pipefail
generate=$1; ckpt=$2; shift 2
mpiexec=("$@")
for flags in "--max-new 10" "--max-new 10 --temperature 0.9 --top-k 5 --seed 3"; do
  one=$(OMP_NUM_THREADS=1 "$generate" --ckpt "$ckpt" --prompt "12+34=" $flags)
  two=$(OMP_NUM_THREADS=1 "${mpiexec[@]}" -n 2 "$generate" --ckpt "$ckpt" --prompt "12+34=" --mesh tensor=2 $flags)
  if [ "$one" != "$two" ]; then echo "FAIL ($flags): one process '$one', tensor=2 '$two'"; exit 1; fi
  echo "ok ($flags): '$one' on 1 process and on tensor=2"
done
