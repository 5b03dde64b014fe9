#!/usr/bin/env bash
# Sets up (installs missing packages, builds) and runs the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
