#!/usr/bin/env bash
# Builds the whole tree with a sanitizer and runs ctest.
#   scripts/sanitize.sh [address|thread]     default: address (ASan + UBSan)
# address → build-asan, thread → build-tsan (next to the sources; BUILD_DIR overrides).
# Extra ctest arguments through CTEST_ARGS, e.g. CTEST_ARGS="-L unit". By default the
# "timed" scenarios (durations against busy waits) are left out: CTEST_ARGS=" " runs all.
# So are the scenarios that run the nvcc-built samples (test_nvcc, test_sqlite's
# nvcc_sample, existing_file and damaged): under the sanitized build the samples die of
# SEGV at start (a null call), and the run fails before anything is exported.
#
# The launcher, collector, formats and every unit test carry the sanitizer. The
# injected library keeps UBSan but neither ASan nor TSan: their runtimes must come
# first in a process, and real targets (python3, any binary) are not built with them;
# see inject/CMakeLists.txt. Its logic runs under the sanitizer in its unit tests, and
# the fuzz targets use ASan through clang. The test programs carry no sanitizer (they are the
# "real targets"; some crash on purpose). A few helper programs outside tests/programs
# (the fake-CUPTI workload, the NVTX driver) stay ASan-built: for them the link-order
# check is off, which works since libasan is still loaded at start-up.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-address}
jobs=${JOBS:-2}
case $mode in
  address) sanitize=address,undefined; build=${BUILD_DIR:-$root/build-asan} ;;
  thread) sanitize=thread; build=${BUILD_DIR:-$root/build-tsan} ;;
  *) echo "usage: scripts/sanitize.sh [address|thread]" >&2; exit 2 ;;
esac

cmake -S "$root" -B "$build" -G Ninja -DTORCHPROF_BUILD_TESTS=ON -DTORCHPROF_SANITIZE="$sanitize" \
  -DTORCHPROF_LIBFUZZER=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs"

# Any report fails the test that produced it. Leaks are checked (ASan's default).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0:verify_asan_link_order=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0:exitcode=66:second_deadlock_stack=1}
cd "$build"
# shellcheck disable=SC2086 # CTEST_ARGS is a list of words on purpose
# Left out under ASan as well: the nvcc-built programs and test_torch_ops.gpu_time_on_ops
# (python), which load the drop-in fake libcudart.so.13 (built with the sanitizer) into a
# process without its runtime, and gpu_cap, whose fake CUPTI drops records when the
# sanitizer slows the flush down.
ctest --output-on-failure -j "$jobs" ${CTEST_ARGS:--LE timed -E test_nvcc|test_sqlite.(nvcc_sample|existing_file|damaged)|gpu_check_dry|test_buffers.gpu_cap|gpu_time_on_ops}
