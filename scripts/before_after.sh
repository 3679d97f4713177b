#!/usr/bin/env bash
# A before/after comparison end to end: profiles two variants of the diff_demo test
# program (the "after" one has a "forward" op 1.5x slower) and runs
# `torchprof diff --fail-on-regression` on them. It builds nothing: give it a build
# directory where torchprof, torchprof-run and tests/programs/diff_demo are built.
#
#   scripts/before_after.sh [BUILD_DIR] [extra `torchprof diff` options...]
#
# Environment: STEPS (default 10), AFTER_VARIANT (1 = slower forward, 2 = one op
# replaced, 0 = identical), OUT (default: a fresh temporary directory).
# Exit status: that of `torchprof diff` (1 = a regression was found).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
[[ $# -gt 0 ]] && shift
bin=$build/bin
demo=$build/tests/programs/diff_demo
for exe in "$bin/torchprof" "$bin/torchprof-run" "$demo"; do
  if [[ ! -x $exe ]]; then
    echo "before_after.sh: $exe is not built (a build with -DTORCHPROF_BUILD_TESTS=ON, as scripts/test.sh makes)" >&2
    exit 2
  fi
done

steps=${STEPS:-10}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/torchprof_before_after.XXXXXX")}
mkdir -p "$out"

echo "== before: diff_demo $steps 0 -> $out/before"
"$bin/torchprof-run" -q -o "$out/before" -- "$demo" "$steps" 0
echo "== after:  diff_demo $steps ${AFTER_VARIANT:-1} -> $out/after"
"$bin/torchprof-run" -q -o "$out/after" -- "$demo" "$steps" "${AFTER_VARIANT:-1}"

echo "== torchprof diff --fail-on-regression"
status=0
"$bin/torchprof" diff "$out/before" "$out/after" --fail-on-regression --min-time 500us "$@" || status=$?
case $status in
  0) echo "== no regression beyond the threshold" ;;
  1) echo "== regression found (exit 1): see the lines above" ;;
  *) echo "== torchprof diff failed (exit $status)" ;;
esac
exit "$status"
