#!/usr/bin/env bash
# Configures with the tests and benchmark programs, builds them and runs every test
# (unit + integration).
#   scripts/test.sh [BUILD_DIR]     default: build
# Extra ctest arguments through CTEST_ARGS, e.g. CTEST_ARGS="-L integration".
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
jobs=${JOBS:-2}

cmake -S "$root" -B "$build" -G Ninja -DTORCHPROF_BUILD_TESTS=ON -DTORCHPROF_BUILD_BENCH=ON
cmake --build "$build" -j "$jobs"
cd "$build"
# shellcheck disable=SC2086 # CTEST_ARGS is a list of words on purpose
ctest --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
