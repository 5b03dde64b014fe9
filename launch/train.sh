#!/usr/bin/env bash
# The main job: installs missing Debian packages and builds (launch/setup.sh), then trains
# the default model on the embedded arithmetic task. Arguments go to train_gpt unchanged.
#   bash launch/train.sh                          # the default run, a few minutes on 2 cores
#   bash launch/train.sh --steps 3000 --model gpt-small
# Writes runs/metrics.jsonl and runs/ckpt_*.h5. SHARDLAB_BUILD picks the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SHARDLAB_BUILD:-build}
bash launch/setup.sh "$build_dir" train_gpt generate
exec "$build_dir/examples/train_gpt" "$@"
