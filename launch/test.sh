#!/usr/bin/env bash
# Sets up (installs missing packages, builds) and runs the whole test suite through CTest.
#   launch/test.sh              the suite (CI runs this); tests labelled `long` are left out
#   launch/test.sh --sanitize   the same suite built with ASan + UBSan in build-sanitize/
#   launch/test.sh --long       the suite with the long tests (--long -L long: those alone)
# Further arguments go to ctest (e.g. -R pipeline).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [ "${1:-}" = "--sanitize" ]; then
  shift
  build=build-sanitize
  export SHARDLAB_CMAKE_ARGS="-DSHARDLAB_SANITIZE=ON"
  # MPI's and OpenMP's runtimes keep allocations for the life of the process: leak reports
  # would be theirs. Any other ASan or UBSan report fails the test that triggered it.
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi
long=(-LE long)
if [ "${1:-}" = "--long" ]; then
  shift
  long=()
fi
# The documentation's h5py snippets run in the suite (tests/doc_snippets.sh): Debian's h5py;
# the tokenizer test's reference BPE (tests/bpe_reference.py) uses Debian's regex module.
export SHARDLAB_EXTRA_PACKAGES="python3-h5py python3-regex ${SHARDLAB_EXTRA_PACKAGES:-}"
bash launch/setup.sh "$build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "${long[@]}" "$@"
