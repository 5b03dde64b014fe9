#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/) with clang, ASan and UBSan in build-fuzz/,
# and runs each from its committed seeds (label `fuzz`; not part of the default suite).
#   launch/fuzz.sh                 every harness, 10^6 executions each (or 600 s)
#   RUNS=100000 launch/fuzz.sh     fewer executions
#   launch/fuzz.sh -R checkpoint   further arguments go to ctest
# A finding (crash, sanitizer report, abort, an exception other than UserError) fails the
# harness's test and leaves the input as crash-* in build-fuzz/; rerun it with
#   build-fuzz/tests/fuzz/fuzz_<name> crash-<hash>
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for pkg in clang libclang-rt-14-dev libomp-dev; do dpkg -s "$pkg" > /dev/null 2>&1 || missing+=("$pkg"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
bash launch/setup.sh build plan > /dev/null  # the project's own packages (and a quick target)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDLAB_FUZZ=ON \
  -DBUILD_TESTING=OFF -DSHARDLAB_FUZZ_RUNS="${RUNS:-1000000}" > /dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_all
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd build-fuzz && ctest -L fuzz --output-on-failure "$@"
