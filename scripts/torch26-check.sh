#!/bin/bash
# The torch-facing scenarios against a second real torch: Debian trixie's torch 2.6 (with
# Kineto) in a debootstrap chroot, with this checkout's build copied in at the same path.
# As root, after scripts/test.sh has built BUILD_DIR (default build); .ci/run runs it:
#
#   scripts/torch26-check.sh [BUILD_DIR] [SCENARIO ...]
#
# SCENARIO is FILE.NAME as ctest names them without "integration." (default: the op
# tree, memory, step and op capture scenarios below). The chroot is made once, in
# $TORCH26_ROOT (default /srv/trixie), with python3-torch and python3-torchvision;
# /proc and /dev are bound into it while the scenarios run. Prints PASS or FAIL per
# scenario; exits 1 when one fails, 3 when it cannot run on this machine (not root, no
# chroot made, /proc cannot be bound in: said on one line), 2 on bad arguments.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$REPO/build}" && pwd)
shift || true
ROOT=${TORCH26_ROOT:-/srv/trixie}
MIRROR=${TORCH26_MIRROR:-http://deb.debian.org/debian}

die() { echo "torch26-check: $*" >&2; exit 2; }
skip() { echo "torch26-check: not run here: $*" >&2; exit 3; }
[[ -x $BUILD/bin/torchprof-run ]] || die "$BUILD/bin/torchprof-run is not built (scripts/test.sh builds it)"
[[ $(id -u) -eq 0 ]] || skip "needs root (debootstrap, chroot, mount)"

if [[ ! -x $ROOT/usr/bin/python3 ]] || ! chroot "$ROOT" python3 -c "import torch, torchvision" 2>/dev/null; then
  if ! command -v debootstrap >/dev/null; then
    { apt-get update && apt-get install -y debootstrap; } >/dev/null || skip "debootstrap cannot be installed"
  fi
  echo "torch26-check: making the trixie chroot in $ROOT (a few minutes)"
  debootstrap --variant=minbase --include=python3-torch,python3-torchvision trixie "$ROOT" "$MIRROR" \
    >"${ROOT%/}.debootstrap.log" 2>&1 || skip "debootstrap of trixie failed (log: ${ROOT%/}.debootstrap.log)"
fi

# Not test_torch_ops.stacks_transformer: trixie's torch 2.6 (Python 3.13) dies of SIGSEGV
# in torch.profiler(with_stack=True) itself, the reference that scenario compares with.
if (($# == 0)); then
  set -- test_torch_ops.transformer test_torch_ops.resnet18 test_torch_ops.second_thread \
    test_torch_ops.shapes_transformer test_torch_ops.shapes_resnet18 test_torch_ops.stacks_on_threads \
    test_torch_ops.gpu_time_on_ops test_torch_ops.gpu_time_on_ops_activity test_torch_ops.flops_resnet18 test_torch_ops.flops_transformer \
    test_memory.resnet18 test_memory.transformer test_memory.leak_append test_memory.leak_total \
    test_memory.steady test_memory.cache test_memory.counters \
    test_python.auto_steps test_python.nested_step test_python.two_optimizers test_python.gan_steps \
    test_python.data_loader_ranges test_pytorch_ops.counts test_pytorch_ops.shapes test_pytorch_ops.with_stack \
    test_pytorch_ops.own_profiler test_modules.module_tree test_modules.raised test_sqlite.torch_ops \
    test_python.loader_advice
fi

# The build and the tests at the paths the build refers to.
INSIDE=$ROOT$REPO
rm -rf "$INSIDE"
mkdir -p "$INSIDE"
cp -a "$REPO/tests" "$REPO/python" "$INSIDE/"
mkdir -p "$ROOT$BUILD/tests"
for d in bin lib share; do cp -a "$BUILD/$d" "$ROOT$BUILD/"; done
cp -a "$BUILD/tests/programs" "$ROOT$BUILD/tests/"

cleanup() {
  umount "$ROOT/proc" 2>/dev/null || true
  umount "$ROOT/dev" 2>/dev/null || true
}
trap cleanup EXIT
mountpoint -q "$ROOT/proc" || mount --bind /proc "$ROOT/proc" || skip "cannot bind /proc into $ROOT"
mountpoint -q "$ROOT/dev" || mount --bind /dev "$ROOT/dev" || skip "cannot bind /dev into $ROOT"

echo "torch26-check: $(chroot "$ROOT" python3 -c 'import torch; print("torch", torch.__version__)')"
failed=0
for t in "$@"; do
  file=${t%%.*} name=${t#*.}
  tmp=/tmp/torch26-check/$file.$name
  if chroot "$ROOT" /usr/bin/env TP_BIN_DIR="$BUILD/bin" TP_LIB_DIR="$BUILD/lib" \
      TP_PROGRAMS_DIR="$BUILD/tests/programs" TP_FIXTURES_DIR="$REPO/tests/fixtures" TP_TMP_DIR="$tmp" \
      XDG_CACHE_HOME="$tmp/xdg" /bin/bash -c "mkdir -p $tmp/xdg && cd $REPO && timeout 900 /usr/bin/python3 \
      tests/integration/$file.py $name" >"$ROOT/tmp/torch26-$t.log" 2>&1; then
    echo "PASS $t"
  else
    echo "FAIL $t (log: $ROOT/tmp/torch26-$t.log)"
    failed=1
  fi
done
exit $failed
