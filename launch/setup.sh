#!/usr/bin/env bash
# Installs whatever Debian packages are missing, then configures and builds shardlab.
# Idempotent: a second run installs nothing and rebuilds only what changed.
# Usage: launch/setup.sh [build-dir [target...]]   (default: build, every target;
#        SHARDLAB_CMAKE_ARGS adds -D options, e.g. -DSHARDLAB_SANITIZE=ON;
#        SHARDLAB_EXTRA_PACKAGES adds Debian packages)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift $(( $# > 0 ? 1 : 0 ))
targets=()
[ $# -gt 0 ] && targets=(--target "$@")

packages=(build-essential cmake libopenmpi-dev openmpi-bin libdnnl-dev libhdf5-dev libcxxopts-dev doctest-dev
          nlohmann-json3-dev libtomlplusplus-dev libpcre2-dev)
# launch/test.sh adds what only the tests use (SHARDLAB_EXTRA_PACKAGES, space-separated).
# shellcheck disable=SC2206
packages+=(${SHARDLAB_EXTRA_PACKAGES:-})
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

jobs=$(nproc)
# shellcheck disable=SC2086  # SHARDLAB_CMAKE_ARGS: extra -D options, split on spaces
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${SHARDLAB_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j"$jobs" "${targets[@]}"
