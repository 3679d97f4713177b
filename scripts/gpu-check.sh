#!/usr/bin/env bash
# Checks torchprof on a real GPU (docs/gpu.md, "Checking on a GPU"). Run from the repository root:
#   scripts/gpu-check.sh [--dry] [BUILD_DIR]     (default build; results in $OUT, default ./gpu-check-out)
#   scripts/gpu-check.sh --bundle DIR [BUILD_DIR]   the check and what it needs, for a GPU machine:
#                                                   there, DIR/gpu-check.sh [--dry]
# The cases: CUDA 13 launch attribution on tests/nvcc/cuda13_sample.cu built with -cudart shared
# and statically (nvcc's default), with its synchronisations and trace fields; kernel counts and
# times against CUDA events on long kernels (scripts/gpu/cuda_sample.cu); a PyTorch loop under
# torchprof (op table, kernels) against torch.profiler, and the slowdown of each; torch.profiler
# inside a torchprof run; cudaProfilerStop with kernels queued, an exit without a synchronize,
# a SIGKILL mid-run (scripts/gpu/cupti_cases.cu); the host's cost per launch without torchprof,
# with GPU records only, and with API calls from callbacks and from activity records
# (scripts/gpu/launch_cost.cu), rounds in turn.
# Every step has a time limit, cut to what is left of the whole check's budget
# (GPU_CHECK_BUDGET_S, default 330 s, at most 360); a failed step is a FAIL and the next runs.
# $OUT gets two files: report.txt and gpu-check.tar.gz (summaries, tables, references, step
# logs; under 16 MiB). The last thing printed is the table of every verdict.
# --dry (or GPU_CHECK_DRY=1): no GPU. The nvcc samples run on the build's drop-in
# libcudart.so.13 over the fake libcupti; where torch on CUDA or cupti_cases.cu's calls are
# needed, a gpu_workload script stands in, and its verdicts say "[stand-in]".
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# --bundle DIR [BUILD]: what the check needs, for a machine that has none of this tree:
# DIR/gpu-check.sh (this script), DIR/gpu/ (its programs), DIR/tests/nvcc/ (the CUDA 13
# sample's source) and DIR/build/ with the stripped tools, the injected library, the
# Python bootstrap and, for --dry, the fake CUPTI and runtime and their test programs.
# Only glibc and libstdc++ are needed where it runs; it works from wherever it is copied
# to (DIR/BUNDLE marks it). At most 20 MiB.
make_bundle() {
  local dir=$1 build
  build=$(cd "$2" 2>/dev/null && pwd) || { echo "gpu-check: no build directory $2" >&2; exit 1; }
  [[ -e $dir ]] && { echo "gpu-check: $dir exists: give a new directory" >&2; exit 2; }
  local f missing=""
  for f in bin/torchprof bin/torchprof-run bin/gpu_workload lib/libtorchprof_inject.so share/torchprof/python \
      lib/fake_cupti/libfake_cupti.so lib/fake_cuda/libcudart.so.13 tests/programs/fake_torch_loop; do
    [[ -e $build/$f ]] || missing+="$f "
  done
  [[ -z $missing ]] || { echo "gpu-check: $build lacks $missing(a build with TORCHPROF_BUILD_TESTS=ON)" >&2; exit 1; }
  mkdir -p "$dir/build/bin" "$dir/build/lib/fake_cupti" "$dir/build/lib/fake_cuda" "$dir/build/share" \
    "$dir/build/tests/programs" "$dir/tests/nvcc" || exit 1
  for f in bin/torchprof bin/torchprof-run bin/gpu_workload lib/libtorchprof_inject.so \
      lib/fake_cupti/libfake_cupti.so lib/fake_cuda/libcudart.so.13 tests/programs/fake_torch_loop; do
    strip --strip-unneeded -o "$dir/build/$f" "$build/$f" || exit 1
  done
  ln -s libcudart.so.13 "$dir/build/lib/fake_cuda/libcudart.so"
  cp -a "$build/share/torchprof" "$dir/build/share/"
  cp -a "$HERE/gpu" "$dir/gpu"
  cp "$HERE/gpu-check.sh" "$dir/gpu-check.sh"
  cp "$HERE/../tests/nvcc/cuda13_sample.cu" "$dir/tests/nvcc/"
  git -C "$HERE/.." rev-parse --short HEAD >"$dir/BUNDLE" 2>/dev/null || echo "?" >"$dir/BUNDLE"
  local bytes
  bytes=$(du -sb "$dir" | cut -f1)
  echo "gpu-check: bundle $dir: $((bytes / 1024)) KiB, commit $(cat "$dir/BUNDLE")"
  ldd "$dir/build/bin/torchprof-run" "$dir/build/lib/libtorchprof_inject.so" | sed 's/^/  /'
  if ((bytes > 20 * 1024 * 1024)); then
    echo "gpu-check: the bundle is over 20 MiB" >&2
    exit 1
  fi
  exit 0
}
if [[ ${1:-} == --bundle ]]; then
  [[ -n ${2:-} ]] || { echo "usage: scripts/gpu-check.sh --bundle DIR [BUILD_DIR]" >&2; exit 2; }
  make_bundle "$2" "${3:-build}"
fi

DRY=${GPU_CHECK_DRY:-0}
if [[ ${1:-} == --dry ]]; then
  DRY=1
  shift
fi
# A bundle checks its own build (DIR/build) and holds the sources the check compiles.
if [[ -f $HERE/BUNDLE ]]; then
  REPO=$HERE
  BUILD=${1:-$HERE/build}
else
  REPO=$(dirname "$HERE")
  BUILD=${1:-build}
fi
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "gpu-check: no build directory ${1:-build}" >&2; exit 1; }
OUT=${OUT:-./gpu-check-out}
PY=${PYTHON:-python3}
GPU_DIR="$HERE/gpu"
BUDGET=${GPU_CHECK_BUDGET_S:-330}
((BUDGET > 360)) && BUDGET=360
START=$(date +%s)
DEADLINE=$((START + BUDGET))
RESERVE=15  # seconds kept for the verdict table and the tarball
MAX_TAR_BYTES=$((15 * 1024 * 1024))
MAX_LOG_BYTES=$((256 * 1024))

mkdir -p "$OUT" || { echo "gpu-check: cannot create $OUT" >&2; exit 1; }
OUT=$(cd "$OUT" && pwd)
rm -rf "$OUT/report.txt" "$OUT/gpu-check.tar.gz"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
KEEP="$WORK/keep"  # what goes into the tarball
RUNS="$WORK/runs"  # torchprof's output directories
mkdir -p "$KEEP/logs" "$RUNS"
trap 'rm -rf "$WORK"' EXIT
REPORT="$KEEP/report.txt"
: >"$REPORT"
declare -A WALL_NS=() RC=()
FAILED_STEPS=()

log() { printf '%s\n' "$*" | tee -a "$REPORT"; }
section() { log ""; log "===== $* ($(($(date +%s) - START)) s) ====="; }
left() { echo $((DEADLINE - RESERVE - $(date +%s))); }

# run_step NAME LIMIT_S CMD...: output to logs/NAME.log, rc and wall time recorded, tail in the report.
# EXPECT_FAIL=1 run_step ...: a program expected to fail (its verdict checks the exit code).
run_step() {
  local name=$1 limit=$2
  shift 2
  local l
  l=$(left)
  if ((l < 5)); then
    log "FAIL step.$name: not run, the check's ${BUDGET}s budget is spent"
    RC[$name]=skipped
    FAILED_STEPS+=("$name(skipped)")
    return 1
  fi
  ((limit > l)) && limit=$l
  local t0 t1 rc
  t0=$(date +%s%N)
  timeout --kill-after=3 "$limit" "$@" >"$KEEP/logs/$name.log" 2>&1
  rc=$?
  t1=$(date +%s%N)
  WALL_NS[$name]=$((t1 - t0))
  RC[$name]=$rc
  local what=ok
  ((rc == 124 || rc == 137)) && what="TIMEOUT after ${limit}s"
  ((rc != 0)) && [[ $what == ok ]] && what="FAILED"
  log "STEP $name: rc=$rc $what wall=$(((t1 - t0) / 1000000)) ms   (${*: -3})"
  tail -n 12 "$KEEP/logs/$name.log" | cut -c1-300 | sed 's/^/    | /' >>"$REPORT"
  if ((rc != 0)); then
    ((${EXPECT_FAIL:-0})) || FAILED_STEPS+=("$name")
    return 1
  fi
  return 0
}

pyrun() {  # a verdict or comparison script, bounded, into the report
  local l
  l=$(left)
  ((l < 3)) && { log "FAIL $1: not run, the budget is spent"; return; }
  ((l > 60)) && l=60
  timeout "$l" "$PY" "$@" 2>&1 | tee -a "$REPORT"
}

find_nvcc() {
  if command -v nvcc >/dev/null 2>&1; then
    command -v nvcc
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    echo /usr/local/cuda/bin/nvcc
  fi
}
NVCC=$(find_nvcc)
ARCH=()
if ((!DRY)); then
  CAP=$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
  if [[ $CAP =~ ^[0-9]+$ ]]; then ARCH=("-arch=sm_$CAP"); else ARCH=("-arch=native"); fi
fi
FAKE_CUPTI="$BUILD/lib/fake_cupti/libfake_cupti.so"
FAKE_CUDA="$BUILD/lib/fake_cuda"
WORKLOAD="$BUILD/bin/gpu_workload"
STANDIN="[stand-in]"
LAUNCHES=50000 LAUNCH_ROUNDS=3
((DRY)) && LAUNCHES=20000 LAUNCH_ROUNDS=2

# CUDA programs of the dry run run on the drop-in libcudart.so.13 over the fake libcupti.
CUDA_ENV=(env)
((DRY)) && CUDA_ENV=(env "TORCHPROF_CUPTI_LIB=$FAKE_CUPTI" "LD_LIBRARY_PATH=$FAKE_CUDA${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
tp_step() {  # tp_step NAME LIMIT_S ARGS... -- CMD: run_step of torchprof-run -o $RUNS/NAME
  local name=$1 limit=$2
  shift 2
  rm -rf "${RUNS:?}/$name"
  run_step "$name" "$limit" "${CUDA_ENV[@]}" "$BUILD/bin/torchprof-run" -o "$RUNS/$name" "$@"
}

# Summary, table and stats of a run kept for the tarball; the report gets the table's head.
keep_run() {
  local run=$1 dir="$RUNS/$1" f
  [[ -d $dir ]] || { log "INFO $run: no output directory"; return; }
  for f in summary.json table.txt stats.txt; do
    [[ -f $dir/$f ]] && cp "$dir/$f" "$KEEP/$run.$f"
  done
  log "--- $run: output $(du -sh "$dir" | cut -f1); table.txt (first 25 lines)"
  [[ -f $dir/table.txt ]] && head -n 25 "$dir/table.txt" | cut -c1-200 >>"$REPORT"
}

record_environment() {
  section "environment"
  log "date: $(date -u +%FT%TZ)   host: $(hostname)   repo: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
  log "build dir: $BUILD   out: $OUT   budget: ${BUDGET}s   dry: $DRY"
  log "kernel: $(uname -srm)   glibc: $(ldd --version 2>&1 | head -n1)"
  if ((!DRY)); then
    timeout 20 nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1 | tee -a "$REPORT"
    timeout 20 nvidia-smi 2>&1 | grep -m1 "CUDA Version" | tee -a "$REPORT"
    timeout 60 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -n3 | tee -a "$REPORT"
  fi
  log "nvcc: ${NVCC:-not found} $([[ -n $NVCC ]] && timeout 20 "$NVCC" --version 2>&1 | tail -n2 | tr '\n' ' ')"
  log "python: $($PY --version 2>&1)"
}

# The launcher and the injected library were built elsewhere: they may need only glibc and libstdc++.
check_deps() {
  section "runtime dependencies (readelf -d)"
  local allowed=' libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 libdl.so.2 libpthread.so.0 librt.so.1 ld-linux-x86-64.so.2 '
  local lib inject bad_all=""
  inject=$(find "$BUILD" -name libtorchprof_inject.so -type f 2>/dev/null | head -n1)
  for lib in "$BUILD/bin/torchprof" "$BUILD/bin/torchprof-run" "${inject:-$BUILD/lib/libtorchprof_inject.so}"; do
    if [[ ! -e $lib ]]; then
      bad_all+="$(basename "$lib") missing; "
      continue
    fi
    local needed n bad=""
    needed=$(readelf -d "$(readlink -f "$lib")" 2>&1 | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    for n in $needed; do [[ $allowed == *" $n "* ]] || bad+="$n "; done
    [[ -n $bad ]] && bad_all+="$(basename "$lib") needs $bad; "
  done
  if [[ -z $bad_all ]]; then log "PASS deps: glibc and libstdc++ only"; else log "FAIL deps: $bad_all"; fi
}

# The nvcc programs, compiled side by side (each bounded like a step).
build_programs() {
  section "nvcc builds"
  [[ -n $NVCC ]] || { log "FAIL nvcc: not found (PATH, /usr/local/cuda/bin)"; return; }
  local src="$REPO/tests/nvcc/cuda13_sample.cu" name
  local -A cmd=(
    [nvcc13_shared_build]="-cudart shared -o $WORK/cuda13_shared $src"
    [nvcc13_static_build]="-o $WORK/cuda13_static $src"
    [events_build]="-cudart shared -O2 -std=c++17 -lineinfo -o $WORK/cuda_sample $GPU_DIR/cuda_sample.cu"
    [cases_build]="-O2 -std=c++17 -o $WORK/cupti_cases $GPU_DIR/cupti_cases.cu"
    [launch_build]="-cudart shared -O2 -o $WORK/launch_cost $GPU_DIR/launch_cost.cu")
  for name in "${!cmd[@]}"; do
    # shellcheck disable=SC2086 # the paths have no spaces: $WORK is mktemp's, the repository's is checked
    run_step "$name" 120 "$NVCC" "${ARCH[@]}" ${cmd[$name]} &
  done
  wait
  for name in "${!cmd[@]}"; do
    RC[$name]=1
    if grep -q "^STEP $name: rc=0 " "$REPORT"; then RC[$name]=0; else FAILED_STEPS+=("$name"); fi
  done
}
built() {  # built STEP: whether build_programs' step succeeded
  [[ ${RC[$1]:-x} == 0 ]] && return 0
  log "FAIL ${1%_build}: the nvcc build failed (logs/$1.log)"
  return 1
}

# CUDA 13 launch attribution (finding 1), query synchronisations (3), trace fields (6), on
# tests/nvcc/cuda13_sample.cu built with -cudart shared and with nvcc's default static runtime.
check_nvcc13() {
  section "CUDA 13 launches: tests/nvcc/cuda13_sample.cu"
  local kind
  for kind in shared static; do
    local bin="$WORK/cuda13_$kind"
    built "nvcc13_${kind}_build" || continue
    local run="nvcc13_$kind"
    if ((DRY)) && [[ $kind == static ]]; then
      # The static runtime cannot use the drop-in one: here it finds no driver, as on a machine without one.
      EXPECT_FAIL=1 run_step "${run}_plain" 60 "$bin"
      EXPECT_FAIL=1 run_step "$run" 60 "$BUILD/bin/torchprof-run" -o "$RUNS/$run" -- "$bin"
      keep_run "$run"
      pyrun "$GPU_DIR/cupti_verdicts.py" nvcc13 --label "$kind$STANDIN" --summary "$RUNS/$run/summary.json" \
        --rc "${RC[$run]}" --expect-rc "${RC[${run}_plain]}" --no-driver --stderr "$KEEP/logs/$run.log"
      continue
    fi
    tp_step "$run" 60 -- "$bin"
    keep_run "$run"
    pyrun "$GPU_DIR/cupti_verdicts.py" nvcc13 --label "$kind" --summary "$RUNS/$run/summary.json" \
      --rc "${RC[$run]}" --trace-dir "$RUNS/$run/traces"
    # One trace of a known program for TensorBoard/HTA by hand, if it is small.
    local t
    t=$(find "$RUNS/$run/traces" -name '*.pt.trace.json*' -size -4M 2>/dev/null | head -n1)
    [[ $kind == shared && -n $t ]] && cp "$t" "$KEEP/"
    [[ $kind == shared ]] || continue
    # The same program with its API calls from CUPTI's RUNTIME/DRIVER records
    # (TORCHPROF_CUDA_API=activity): the same launches, attributed to the same ranges.
    TORCHPROF_CUDA_API=activity tp_step "${run}_activity" 60 -- "$bin"
    keep_run "${run}_activity"
    pyrun "$GPU_DIR/cupti_verdicts.py" nvcc13 --label "${kind}_activity" \
      --summary "$RUNS/${run}_activity/summary.json" --rc "${RC[${run}_activity]}"
  done
}

# Kernel counts and times against CUDA events: two >= 1 ms kernels back to back per iteration.
check_events() {
  section "kernels against CUDA events: scripts/gpu/cuda_sample.cu"
  local bin="$WORK/cuda_sample" args=()
  # The drop-in runtime really copies on the host. Its kernels last 10 us + 10 ns per thread,
  # and an event recorded on an idle stream takes the host's time, as a GPU's does: a
  # host held up between an event and its launch (a loaded machine) lengthens what the
  # event measures. Eight times the grid (21 ms kernels) keeps that under 2%.
  ((DRY)) && args=(--n 65536 --grid-scale 8)
  built events_build || return
  run_step events_plain 60 "${CUDA_ENV[@]}" "$bin" "${args[@]}" --out "$WORK/events_plain.json"
  tp_step events_run 60 -- "$bin" "${args[@]}" --out "$KEEP/events_ref.json"
  keep_run events_run
  local label=events
  ((DRY)) && label="events/stand-in"  # the fake's events time its own kernels: checks the script
  pyrun "$GPU_DIR/compare.py" --title "$label" --summary "$RUNS/events_run/summary.json" \
    --reference "$KEEP/events_ref.json" --long-ns 1000000
}

# The PyTorch loop: torch.profiler alone (the reference), torchprof --pytorch-ops, plain.
check_torch() {
  section "PyTorch: scripts/gpu/torch_train.py under torchprof and torch.profiler"
  local script="$GPU_DIR/torch_train.py"
  run_step torch_plain 90 "$PY" "$script"
  run_step torch_profiler 120 "$PY" "$script" --torch-profiler "$KEEP/torch_ref.json"
  tp_step torch_run 120 --pytorch-ops -- "$PY" "$script"
  keep_run torch_run
  # Two runs of the script: their short kernels differ a little each, their sum must not.
  pyrun "$GPU_DIR/compare.py" --title torch --summary "$RUNS/torch_run/summary.json" --reference "$KEEP/torch_ref.json" \
    --total-only
  pyrun "$GPU_DIR/cupti_verdicts.py" trace --label torch --trace-dir "$RUNS/torch_run/traces"
  walls torch_plain torch_run torch_profiler ""
  # torch.profiler inside a torchprof run (finding 2): both get every kernel.
  tp_step torch_inside 120 --pytorch-ops -- "$PY" "$script" --torch-profiler "$KEEP/torch_ref_inside.json"
  keep_run torch_inside
  # The op capture steps aside while the program's own profiler runs: kernels only here.
  pyrun "$GPU_DIR/compare.py" --title torch_inside --summary "$RUNS/torch_inside/summary.json" \
    --reference "$KEEP/torch_ref_inside.json" --gpu-only
  pyrun "$GPU_DIR/cupti_verdicts.py" second-client --summary "$RUNS/torch_inside/summary.json" \
    --inside "$KEEP/torch_ref_inside.json" --alone "$KEEP/torch_ref.json" --rc "${RC[torch_inside]}"
  # --memory-snapshot (so --profile-memory): the caching allocator's reports against its own peaks.
  tp_step torch_memory 120 --memory-snapshot -- "$PY" "$script" --memory-stats "$KEEP/torch_mem_ref.json"
  keep_run torch_memory
  pyrun "$GPU_DIR/cupti_verdicts.py" memory --summary "$RUNS/torch_memory/summary.json" \
    --memory-ref "$KEEP/torch_mem_ref.json" --snapshot "$RUNS/torch_memory/memory_snapshot.pickle"
}

walls() {  # walls PLAIN TORCHPROF REFERENCE LABEL: the slowdown verdict from three steps' walls
  local a=()
  [[ ${RC[$1]:-x} == 0 ]] && a+=(--wall "plain=${WALL_NS[$1]}")
  [[ ${RC[$2]:-x} == 0 ]] && a+=(--wall "torchprof=${WALL_NS[$2]}")
  [[ ${RC[$3]:-x} == 0 ]] && a+=(--wall "reference=${WALL_NS[$3]}")
  ((DRY)) && a+=(--no-bound)  # wall times of stand-ins on a shared machine: a figure, not a verdict
  pyrun "$GPU_DIR/cupti_verdicts.py" slowdown --label "$4" "${a[@]}"
}

# The dry run's stand-in for torch on CUDA: NVTX ranges named as aten ops around kernels of
# known lengths (gpu_workload on the fake); the reference is what torch.profiler would report.
check_torch_dry() {
  section "PyTorch $STANDIN: gpu_workload ranges named as aten ops, reference from the script"
  local k1="kernel:_Z4gemmv:2ms" k2="kernel:_Z4relufv:500us" steps=400 body="" i
  for ((i = 0; i < steps; i++)); do body+="range:aten::mm{ $k1 } ; range:aten::relu{ $k2 } ; "; done
  local script="${body}sync"
  "$PY" - "$steps" >"$KEEP/torch_ref.json" <<'EOF'
import json, sys
n = int(sys.argv[1])
ops = {"gemm()": {"count": n, "total_ns": n * 2e6}, "relu(float)": {"count": n, "total_ns": n * 5e5}}
rows = [{"name": "aten::mm", "count": n, "self_cuda_time_total_us": n * 2000.0},
        {"name": "aten::relu", "count": n, "self_cuda_time_total_us": n * 500.0},
        {"name": "gemm()", "count": n, "self_cuda_time_total_us": n * 2000.0},
        {"name": "relu(float)", "count": n, "self_cuda_time_total_us": n * 500.0}]
json.dump({"tool": "stand-in reference", "gpu_ops": ops, "busy_ns": n * 2.5e6, "key_averages": rows}, sys.stdout)
EOF
  export TORCHPROF_CUPTI_LIB=$FAKE_CUPTI
  run_step torch_plain 60 "$WORKLOAD" "$script"
  run_step torch_profiler 60 "$WORKLOAD" "client_start ; $script ; client_stop"
  tp_step torch_run 60 -- "$WORKLOAD" "$script"
  keep_run torch_run
  pyrun "$GPU_DIR/compare.py" --title "torch/stand-in" --summary "$RUNS/torch_run/summary.json" \
    --reference "$KEEP/torch_ref.json" --total-only
  pyrun "$GPU_DIR/cupti_verdicts.py" trace --label "torch$STANDIN" --trace-dir "$RUNS/torch_run/traces"
  walls torch_plain torch_run torch_profiler "$STANDIN"
  # torch.profiler inside: a second CUPTI client used as Kineto uses it (gpu_workload checks what it got).
  local k="kernel:_Z11spin_kernelx"
  tp_step torch_inside 60 -q -- "$WORKLOAD" \
    "range:before{ $k:1ms } ; sync ; client_start ; range:inside{ $k:2ms ; $k:2ms } ; sync ; client_stop ;
     range:after{ $k:1ms } ; sync"
  keep_run torch_inside
  pyrun "$GPU_DIR/cupti_verdicts.py" second-client --summary "$RUNS/torch_inside/summary.json" \
    --launched "spin_kernel(long long)=4" --rc "${RC[torch_inside]}" --label "$STANDIN"
  unset TORCHPROF_CUPTI_LIB
  # --profile-memory over a stand-in libc10/libc10_cuda: 10 blocks of 1.5 MiB kept, in 2 MiB segments.
  local loop="$BUILD/tests/programs/fake_torch_loop"
  if [[ -x $loop ]]; then
    echo '{"max_allocated": 15728640, "max_reserved": 16777216}' >"$KEEP/torch_mem_ref.json"
    tp_step torch_memory 60 --memory-snapshot -- "$loop" 10 4096 1572864 1
    keep_run torch_memory
    pyrun "$GPU_DIR/cupti_verdicts.py" memory --summary "$RUNS/torch_memory/summary.json" \
      --memory-ref "$KEEP/torch_mem_ref.json" --snapshot "$RUNS/torch_memory/memory_snapshot.pickle" \
      --label "$STANDIN"
  else
    log "FAIL memory$STANDIN: $loop is not built"
  fi
}

# run_killed NAME DELAY_S LIMIT_S CMD...: torchprof-run -o $RUNS/NAME -- CMD in the background;
# once the program prints "ready pid=N", waits DELAY_S and SIGKILLs N. RC[NAME] = torchprof-run's
# status; it is SIGKILLed itself when it outlives LIMIT_S (cut to the budget left).
run_killed() {
  local name=$1 delay=$2 limit=$3
  shift 3
  local l log="$KEEP/logs/$name.log" pid="" t0
  l=$(left)
  ((limit > l)) && limit=$l
  if ((limit < 5)); then
    log "FAIL step.$name: not run, the budget is spent"
    RC[$name]=skipped
    return
  fi
  t0=$(date +%s)
  rm -rf "${RUNS:?}/$name"
  "${CUDA_ENV[@]}" "$BUILD/bin/torchprof-run" -o "$RUNS/$name" -- "$@" >"$log" 2>&1 &
  local runner=$!
  while (($(date +%s) - t0 < limit)) && kill -0 "$runner" 2>/dev/null; do
    pid=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$log" | head -n1)
    [[ -n $pid ]] && break
    sleep 0.1
  done
  if [[ -n $pid ]]; then
    sleep "$delay"
    kill -KILL "$pid" 2>/dev/null
  else
    log "STEP $name: the program never printed 'ready'"
  fi
  while (($(date +%s) - t0 < limit)) && kill -0 "$runner" 2>/dev/null; do sleep 0.1; done
  if kill -0 "$runner" 2>/dev/null; then
    log "STEP $name: torchprof-run still running after ${limit}s: SIGKILLed"
    kill -KILL "$runner" 2>/dev/null
  fi
  wait "$runner"
  RC[$name]=$?
  log "STEP $name: rc=${RC[$name]} (SIGKILL of pid ${pid:-?} ${delay}s after ready)"
  tail -n 8 "$log" | cut -c1-300 | sed 's/^/    | /' >>"$REPORT"
}

# cudaProfilerStop with kernels queued, an exit without a synchronize, a SIGKILL mid-run.
check_cupti_cases() {
  section "CUPTI cases: scripts/gpu/cupti_cases.cu"
  built cases_build || return
  local mode
  for mode in profiler-stop no-sync-exit; do
    tp_step "cupti_$mode" 60 -q -- "$WORK/cupti_cases" "$mode" --out "$KEEP/case_$mode.json"
    pyrun "$GPU_DIR/cupti_verdicts.py" "$mode" --summary "$RUNS/cupti_$mode/summary.json" \
      --case "$KEEP/case_$mode.json" --rc "${RC["cupti_$mode"]}"
  done
  run_killed cupti_sigkill 2 60 "$WORK/cupti_cases" sigkill --out "$KEEP/case_sigkill.json"
  pyrun "$GPU_DIR/cupti_verdicts.py" sigkill --summary "$RUNS/cupti_sigkill/summary.json" \
    --case "$KEEP/case_sigkill.json" --rc "${RC[cupti_sigkill]}" --before 20
}

check_cupti_cases_dry() {
  section "CUPTI cases $STANDIN: gpu_workload scripts stand for cupti_cases.cu"
  export TORCHPROF_CUPTI_LIB=$FAKE_CUPTI
  local k="kernel:_Z11spin_kernelx" eight="" mode
  for _ in 1 2 3 4 5 6 7 8; do eight+="$k:20ms ; "; done
  local -A script=([profiler-stop]="range:case{ ${eight}profiler_stop } ; sync" [no-sync-exit]="${eight% ; }")
  for mode in profiler-stop no-sync-exit; do
    printf '{"mode": "%s", "kernel": "spin_kernel(long long)", "launched": 8, "each_ns": 20000000}\n' "$mode" \
      >"$KEEP/case_$mode.json"
    tp_step "cupti_$mode" 60 -q -- "$WORKLOAD" "${script[$mode]}"
    pyrun "$GPU_DIR/cupti_verdicts.py" "$mode" --summary "$RUNS/cupti_$mode/summary.json" \
      --case "$KEEP/case_$mode.json" --rc "${RC["cupti_$mode"]}" --label "$STANDIN"
  done
  # The launched count at the kill is not known here: only what came before 'ready' is checked.
  printf '{"mode": "sigkill", "kernel": "spin_kernel(long long)", "launched": null, "each_ns": 5000000}\n' \
    >"$KEEP/case_sigkill.json"
  run_killed cupti_sigkill 2 60 "$WORKLOAD" \
    "repeat:20{ $k:5ms ; sync ; sleep:20ms } ; ready ; repeat:100000{ $k:5ms ; sync ; sleep:20ms }"
  pyrun "$GPU_DIR/cupti_verdicts.py" sigkill --summary "$RUNS/cupti_sigkill/summary.json" \
    --case "$KEEP/case_sigkill.json" --rc "${RC[cupti_sigkill]}" --before 20 --label "$STANDIN"
  unset TORCHPROF_CUPTI_LIB
}

# The host's ns per launch (scripts/gpu/launch_cost.cu) without torchprof, with GPU records
# only, and with API calls from callbacks and from CUPTI's activity records: the figures the
# default TORCHPROF_CUDA_API is chosen by. Rounds in turn, so each mode sees the same machine.
check_launch_cost() {
  section "launch cost: scripts/gpu/launch_cost.cu, $LAUNCH_ROUNDS rounds of $LAUNCHES launches"
  built launch_build || return
  local bin="$WORK/launch_cost" r mode name line figures=() runs=() launched=""
  local -A trace=([gpu]=nvtx,gpu [callbacks]=nvtx,cuda,gpu [activity]=nvtx,cuda,gpu)
  for ((r = 1; r <= LAUNCH_ROUNDS; r++)); do
    for mode in plain gpu callbacks activity; do
      name="launch_${mode}_$r"
      if [[ $mode == plain ]]; then
        run_step "$name" 60 "${CUDA_ENV[@]}" "$bin" "$LAUNCHES"
      else
        TORCHPROF_TRACE=${trace[$mode]} TORCHPROF_CUDA_API=${mode/gpu/callbacks} tp_step "$name" 60 -q -- \
          "$bin" "$LAUNCHES"
        ((r == LAUNCH_ROUNDS)) && [[ ${RC[$name]} == 0 ]] && runs+=(--run "$mode=$RUNS/$name/summary.json")
      fi
      [[ ${RC[$name]} == 0 ]] || continue
      line=$(grep -m1 '^launch_cost ' "$KEEP/logs/$name.log")
      if [[ $line =~ ns_per_launch=([0-9.]+)\ launched=([0-9]+) ]]; then
        figures+=(--figure "$mode=${BASH_REMATCH[1]}")
        launched=${BASH_REMATCH[2]}
      fi
    done
  done
  keep_run "launch_activity_$LAUNCH_ROUNDS"
  local label=""
  ((DRY)) && label="/fake"  # the fake's costs, not CUPTI's: checks the script and the counts
  pyrun "$GPU_DIR/cupti_verdicts.py" launch-cost --label "$label" "${figures[@]}" "${runs[@]}" \
    --kernels-launched "${launched:-0}"
}

# One table of every PASS/FAIL line: check, verdict, detail.
verdict_table() {
  grep -hE '^(PASS|FAIL)' "$REPORT" >"$WORK/verdicts.txt"
  section "verdicts"
  {
    printf '%-46s %-7s %s\n' "check" "verdict" "detail"
    printf '%-46s %-7s %s\n' "-----" "-------" "------"
    sed -E 's/^(PASS|FAIL) ([^:]*): ?(.*)$/\2\t\1\t\3/' "$WORK/verdicts.txt" |
      awk -F'\t' '{ printf "%-46s %-7s %s\n", substr($1, 1, 46), $2, substr($3, 1, 110) }'
    printf '%d PASS, %d FAIL; failed steps: %s; %d s of %d\n' "$(grep -c '^PASS' "$WORK/verdicts.txt")" \
      "$(grep -c '^FAIL' "$WORK/verdicts.txt")" "${FAILED_STEPS[*]:-none}" $(($(date +%s) - START)) "$BUDGET"
  } >"$WORK/table.txt"
  cat "$WORK/table.txt" >>"$REPORT"
}

# report.txt and one tarball in $OUT; logs cut to their tails, the largest files left out until it fits.
pack() {
  local f
  for f in "$KEEP"/logs/*.log; do
    [[ -f $f ]] || continue
    if (($(stat -c %s "$f") > MAX_LOG_BYTES)); then
      tail -c "$MAX_LOG_BYTES" "$f" >"$f.tail" && mv "$f.tail" "$f"
    fi
  done
  cp "$WORK/verdicts.txt" "$KEEP/"
  while :; do
    tar -C "$WORK" -czf "$OUT/gpu-check.tar.gz" keep
    (($(stat -c %s "$OUT/gpu-check.tar.gz") <= MAX_TAR_BYTES)) && break
    f=$(find "$KEEP" -type f ! -name report.txt -printf '%s %p\n' | sort -n | tail -n1 | cut -d' ' -f2-)
    [[ -n $f ]] || break
    echo "left out of the tarball: ${f#"$KEEP"/} ($(stat -c %s "$f") bytes)" | tee -a "$REPORT"
    rm -f "$f"
  done
  cp "$REPORT" "$OUT/report.txt"
}

main() {
  record_environment
  check_deps
  if ((DRY)); then
    local missing=""
    for f in "$WORKLOAD" "$FAKE_CUPTI" "$FAKE_CUDA/libcudart.so.13"; do [[ -e $f ]] || missing+="$f "; done
    [[ -z $missing ]] || log "FAIL dry run: not built: $missing(a build with TORCHPROF_BUILD_TESTS=ON)"
  fi
  [[ $REPO$GPU_DIR == *" "* ]] && log "FAIL paths: the repository's path has a space: $REPO"
  build_programs
  check_nvcc13
  check_events
  if ((DRY)); then check_torch_dry; else check_torch; fi
  if ((DRY)); then check_cupti_cases_dry; else check_cupti_cases; fi
  check_launch_cost
  verdict_table
  pack
  echo
  cat "$WORK/table.txt"
  echo "results: $OUT/report.txt, $OUT/gpu-check.tar.gz ($(du -h "$OUT/gpu-check.tar.gz" | cut -f1))"
}

main
exit 0
