#!/usr/bin/env bash
# ns per kernel launch through the fake libcupti: without torchprof, and under
# torchprof-run with TORCHPROF_TRACE=gpu (no API calls recorded), cuda,gpu (API
# callbacks) and cuda,gpu with TORCHPROF_CUDA_API=activity (CUPTI's API records),
# ROUNDS times in turn, so the four see the same machine. The fake's own cost of
# writing an API record is not CUPTI's: only a GPU compares the last two for real. With
# OTHER_BUILD set, the cuda,gpu case also runs under that build's torchprof-run
# (a before/after comparison in one run).
#
#   inject/tools/cupti_bench.sh [BUILD_DIR]      (env: LAUNCHES, CHATTER, ROUNDS, OTHER_BUILD)
set -euo pipefail

build=${1:-build}
launches=${LAUNCHES:-200000}
chatter=${CHATTER:-4}
rounds=${ROUNDS:-3}
bench=$build/bin/torchprof_inject_cupti_bench
fake=$build/lib/fake_cupti/libfake_cupti.so
for f in "$bench" "$fake" "$build/bin/torchprof-run"; do
  [[ -e $f ]] || { echo "cupti_bench.sh: $f is not built" >&2; exit 2; }
done
out=$(mktemp -d "${TMPDIR:-/tmp}/cupti_bench.XXXXXX")
trap 'rm -rf "$out"' EXIT

one() {  # LABEL TORCHPROF_RUN|'' TRACE
  local label=$1 run=$2 trace=$3 line
  if [[ -z $run ]]; then
    line=$("$bench" "$fake" "$launches" "$chatter")
  else
    line=$(TORCHPROF_CUPTI_LIB=$fake TORCHPROF_TRACE=$trace "$run" -q -o "$out/$label.$RANDOM" -- \
      "$bench" "$fake" "$launches" "$chatter")
  fi
  printf '%-24s %s\n' "$label" "$line"
}

for ((r = 1; r <= rounds; r++)); do
  echo "round $r ($launches launches, $chatter other API calls each)"
  one "no torchprof" "" ""
  one "trace=gpu" "$build/bin/torchprof-run" "nvtx,gpu"
  one "trace=cuda,gpu" "$build/bin/torchprof-run" "nvtx,cuda,gpu"
  TORCHPROF_CUDA_API=activity one "cuda,gpu api=activity" "$build/bin/torchprof-run" "nvtx,cuda,gpu"
  if [[ -n ${OTHER_BUILD:-} ]]; then
    one "other: trace=cuda,gpu" "$OTHER_BUILD/bin/torchprof-run" "nvtx,cuda,gpu"
  fi
done
