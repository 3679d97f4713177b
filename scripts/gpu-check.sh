#!/usr/bin/env bash
# Checks torchprof on a real GPU against references: a CUDA sample timed with CUDA
# events, a PyTorch loop under torch.profiler, and the CUPTI cases (docs/gpu.md, "What real
# CUPTI does"): torch.profiler inside the profiled process, cudaProfilerStop with kernels
# queued, an exit without synchronizing, a SIGKILL mid-run. Run from the repository root:
#   scripts/gpu-check.sh [--dry] [BUILD_DIR]   (default: build; report under $OUT, default ./gpu-check-out)
# Every step's failure is recorded in $OUT/report.txt and the next step runs;
# each step has a time limit and the whole check stops starting steps after ~5 minutes.
# The last thing printed is one table of every verdict.
# --dry (or GPU_CHECK_DRY=1): no GPU needed; only the CUPTI cases run, against the fake
# libcupti and gpu_workload of a build with tests, to check the script and its verdicts.
set -u

DRY=${GPU_CHECK_DRY:-0}
if [[ ${1:-} == --dry ]]; then
  DRY=1
  shift
fi
BUILD=${1:-build}
OUT=${OUT:-./gpu-check-out}
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GPU_DIR="$HERE/gpu"
DEADLINE=$(($(date +%s) + ${GPU_CHECK_BUDGET_S:-290}))
MAX_KEEP_BYTES=$((20 * 1024 * 1024))

mkdir -p "$OUT/work" || { echo "gpu-check: cannot create $OUT" >&2; exit 1; }
OUT=$(cd "$OUT" && pwd)
WORK="$OUT/work"
REPORT="$OUT/report.txt"
: >"$REPORT"
declare -A WALL_NS=() RC=()
FAILED_STEPS=()

log() { printf '%s\n' "$*" | tee -a "$REPORT"; }
section() { log ""; log "===== $* ====="; }

# run_step NAME LIMIT_S CMD...: output to $WORK/NAME.log, rc and wall time recorded, tail in the report.
run_step() {
  local name=$1 limit=$2
  shift 2
  local left=$((DEADLINE - $(date +%s)))
  if ((left < 10)); then
    log "STEP $name: SKIPPED (time budget spent)"
    RC[$name]=skipped
    FAILED_STEPS+=("$name(skipped)")
    return 1
  fi
  ((limit > left)) && limit=$left
  local t0 t1 rc
  t0=$(date +%s%N)
  timeout --kill-after=5 "$limit" "$@" >"$WORK/$name.log" 2>&1
  rc=$?
  t1=$(date +%s%N)
  WALL_NS[$name]=$((t1 - t0))
  RC[$name]=$rc
  local verdict=ok
  ((rc == 124 || rc == 137)) && verdict="TIMEOUT after ${limit}s"
  ((rc != 0)) && [[ $verdict == ok ]] && verdict="FAILED"
  log "STEP $name: rc=$rc $verdict wall=$(((t1 - t0) / 1000000)) ms   ($*)"
  tail -n 25 "$WORK/$name.log" | sed 's/^/    | /' | tee -a "$REPORT"
  if ((rc != 0)); then
    FAILED_STEPS+=("$name")
    return 1
  fi
  return 0
}

find_nvcc() {
  if command -v nvcc >/dev/null 2>&1; then
    command -v nvcc
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    echo /usr/local/cuda/bin/nvcc
  fi
}

record_environment() {
  section "environment"
  log "date: $(date -u +%FT%TZ)   host: $(hostname)   repo: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  log "build dir: $BUILD   out: $OUT"
  log "kernel: $(uname -srm)   glibc: $(ldd --version 2>&1 | head -n1)"
  log "--- nvidia-smi -L"
  { nvidia-smi -L; } 2>&1 | tee -a "$REPORT"
  { nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv; } 2>&1 | tee -a "$REPORT"
  { nvidia-smi; } 2>&1 | grep -m1 "CUDA Version" | tee -a "$REPORT"
  local nvcc
  nvcc=$(find_nvcc)
  log "nvcc: ${nvcc:-not found} $([[ -n $nvcc ]] && "$nvcc" --version 2>&1 | tail -n2 | tr '\n' ' ')"
  log "python: $($PY --version 2>&1)"
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -n3 | tee -a "$REPORT"
  log "cmake: $(cmake --version 2>&1 | head -n1)"
}

# The launcher and the injected library were built elsewhere: they may need only glibc and libstdc++.
check_deps() {
  section "runtime dependencies (readelf -d)"
  local allowed=' libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 libdl.so.2 libpthread.so.0 librt.so.1 ld-linux-x86-64.so.2 '
  local lib inject
  inject=$(find "$BUILD" -name libtorchprof_inject.so -type f 2>/dev/null | head -n1)
  for lib in "$BUILD/bin/torchprof" "$BUILD/bin/torchprof-run" "${inject:-$BUILD/lib/libtorchprof_inject.so}"; do
    if [[ ! -e $lib ]]; then
      log "FAIL deps: $lib missing"
      continue
    fi
    local real needed bad=""
    real=$(readlink -f "$lib")
    needed=$(readelf -d "$real" 2>&1 | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    for n in $needed; do
      [[ $allowed == *" $n "* ]] || bad+="$n "
    done
    if [[ -z $bad ]]; then log "PASS deps $lib: $needed"; else log "FAIL deps $lib: unexpected $bad(all: $needed)"; fi
    if ldd "$real" 2>&1 | grep -q "not found"; then
      log "FAIL ldd $lib:"
      ldd "$real" 2>&1 | grep "not found" | sed 's/^/    /' | tee -a "$REPORT"
    fi
  done
  run_step torchprof_version 20 "$BUILD/bin/torchprof" --version
}

# Summary, table and stats of a run side by side in $OUT; big traces and captures go, their sizes stay.
collect_run() {
  local run=$1 dir="$OUT/$1"
  [[ -d $dir ]] || { log "FAIL $run: no output directory $dir"; return 1; }
  local f
  for f in summary.json table.txt stats.txt; do
    if [[ -f $dir/$f ]]; then cp "$dir/$f" "$OUT/$run.$f"; else log "INFO $run: no $f"; fi
  done
  log "--- $run: output sizes"
  du -sb "$dir"/* 2>/dev/null | sed 's/^/    /' | tee -a "$REPORT"
  local big
  for big in "$dir/traces" "$dir/capture.tprof" "$dir/report.html"; do
    [[ -e $big ]] || continue
    local size
    size=$(du -sb "$big" | cut -f1)
    if ((size > MAX_KEEP_BYTES)); then
      rm -rf "$big"
      log "    removed $big ($size bytes, over $MAX_KEEP_BYTES)"
    fi
  done
  if [[ -f $dir/table.txt ]]; then
    log "--- $run: table.txt (first 45 lines)"
    head -n 45 "$dir/table.txt" | tee -a "$REPORT"
  fi
  if [[ -f $dir/stats.txt ]]; then
    log "--- $run: stats.txt (first 60 lines)"
    head -n 60 "$dir/stats.txt" | tee -a "$REPORT"
  fi
}

wall_arg() {  # --wall LABEL=NS for steps that succeeded
  local label=$1 step=$2
  [[ ${RC[$step]:-x} == 0 ]] && printf -- '--wall\n%s=%s\n' "$label" "${WALL_NS[$step]}"
}

compare() {
  local title=$1 summary=$2 ref=$3
  shift 3
  if [[ ! -f $summary || ! -f $ref ]]; then
    log "FAIL compare $title: missing $([[ -f $summary ]] || echo "$summary ")$([[ -f $ref ]] || echo "$ref")"
    return
  fi
  timeout 60 "$PY" "$GPU_DIR/compare.py" --title "$title" --summary "$summary" --reference "$ref" "$@" 2>&1 |
    tee -a "$REPORT" "$OUT/compare_$title.txt"
}

check_sample() {
  section "CUDA sample"
  local nvcc arch cap
  nvcc=$(find_nvcc)
  if [[ -z $nvcc ]]; then
    log "FAIL sample: nvcc not found (PATH, /usr/local/cuda/bin)"
    return
  fi
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
  if [[ $cap =~ ^[0-9]+$ ]]; then arch="-arch=sm_$cap"; else arch="-arch=native"; fi
  run_step sample_build 120 "$nvcc" -O2 -std=c++17 "$arch" -lineinfo -o "$WORK/cuda_sample" \
    "$GPU_DIR/cuda_sample.cu" -ldl || return
  run_step sample_plain 60 "$WORK/cuda_sample" --out "$WORK/sample_ref_plain.json"
  rm -rf "$OUT/sample_run"
  run_step sample_torchprof 90 "$BUILD/bin/torchprof-run" -o "$OUT/sample_run" --stats -- \
    "$WORK/cuda_sample" --out "$OUT/sample_ref.json"
  collect_run sample_run
  # The reference is the same execution's CUDA-event timings, so both see the same kernels.
  local walls=()
  mapfile -t walls < <(wall_arg plain sample_plain; wall_arg torchprof sample_torchprof)
  compare sample "$OUT/sample_run/summary.json" "$OUT/sample_ref.json" "${walls[@]}"
  [[ -f $WORK/sample_ref_plain.json ]] && cp "$WORK/sample_ref_plain.json" "$OUT/"
}

check_torch() {
  section "PyTorch training loop"
  local script="$GPU_DIR/torch_train.py"
  run_step torch_plain 120 "$PY" "$script"
  rm -rf "$OUT/torch_run" "$OUT/torch_run_noops"
  # TORCHPROF_PYTORCH_OPS=nvtx: aten ops as NVTX ranges (emit_nvtx), for the top-ops comparison.
  run_step torch_torchprof 150 env TORCHPROF_PYTORCH_OPS=nvtx "$BUILD/bin/torchprof-run" -o "$OUT/torch_run" \
    --stats -- "$PY" "$script"
  collect_run torch_run
  run_step torch_torchprof_noops 120 "$BUILD/bin/torchprof-run" -q -o "$OUT/torch_run_noops" -- "$PY" "$script"
  collect_run torch_run_noops
  run_step torch_profiler 150 "$PY" "$script" --torch-profiler "$OUT/torch_ref.json"
  local walls=()
  mapfile -t walls < <(wall_arg plain torch_plain; wall_arg torchprof torch_torchprof
    wall_arg torchprof-noops torch_torchprof_noops; wall_arg torch.profiler torch_profiler)
  compare torch "$OUT/torch_run/summary.json" "$OUT/torch_ref.json" "${walls[@]}"
  compare torch_noops "$OUT/torch_run_noops/summary.json" "$OUT/torch_ref.json"
}

# ---- the CUPTI cases ----

verdicts() {  # CASE ARGS...: scripts/gpu/cupti_verdicts.py into the report
  timeout 60 "$PY" "$GPU_DIR/cupti_verdicts.py" "$@" 2>&1 | tee -a "$REPORT"
}

# run_killed NAME DELAY_S OUTDIR CMD...: torchprof-run -o OUTDIR -- CMD in the background;
# once the program prints "ready pid=N", waits DELAY_S and SIGKILLs N; RC[NAME] = torchprof-run's status.
run_killed() {
  local name=$1 delay=$2 dir=$3
  shift 3
  local log="$WORK/$name.log" pid="" waited=0
  rm -rf "$dir"
  "$BUILD/bin/torchprof-run" -o "$dir" -- "$@" >"$log" 2>&1 &
  local runner=$!
  while ((waited < 600)) && kill -0 "$runner" 2>/dev/null; do
    pid=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$log" | head -n1)
    [[ -n $pid ]] && break
    sleep 0.1
    waited=$((waited + 1))
  done
  if [[ -n $pid ]]; then
    sleep "$delay"
    kill -KILL "$pid" 2>/dev/null
  else
    log "STEP $name: the program never printed 'ready'"
    kill -KILL "$runner" 2>/dev/null
  fi
  wait "$runner"
  RC[$name]=$?
  log "STEP $name: rc=${RC[$name]} (SIGKILL of pid ${pid:-?} ${delay}s after ready)"
  tail -n 15 "$log" | sed 's/^/    | /' | tee -a "$REPORT"
}

# The cases on a real GPU: scripts/gpu/cupti_cases.cu, and torch_train.py under both profilers.
check_cupti_cases() {
  section "CUPTI cases"
  local nvcc arch cap
  nvcc=$(find_nvcc)
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
  if [[ $cap =~ ^[0-9]+$ ]]; then arch="-arch=sm_$cap"; else arch="-arch=native"; fi
  if [[ -n $nvcc ]] && run_step cases_build 120 "$nvcc" -O2 -std=c++17 "$arch" -o "$WORK/cupti_cases" \
    "$GPU_DIR/cupti_cases.cu"; then
    local mode
    for mode in profiler-stop no-sync-exit; do
      rm -rf "$OUT/cupti_$mode"
      run_step "cupti_$mode" 60 "$BUILD/bin/torchprof-run" -q -o "$OUT/cupti_$mode" -- \
        "$WORK/cupti_cases" "$mode" --out "$WORK/case_$mode.json"
      verdicts "$mode" --summary "$OUT/cupti_$mode/summary.json" --case "$WORK/case_$mode.json" \
        ${RC["cupti_$mode"]:+--rc "${RC["cupti_$mode"]}"}
    done
    run_killed cupti_sigkill 2 "$OUT/cupti_sigkill" "$WORK/cupti_cases" sigkill --out "$WORK/case_sigkill.json"
    verdicts sigkill --summary "$OUT/cupti_sigkill/summary.json" --case "$WORK/case_sigkill.json" \
      --rc "${RC[cupti_sigkill]}" --before 25
  else
    log "FAIL cupti cases: nvcc not found or the build failed"
  fi
  # torch.profiler inside the profiled process: both must see every kernel.
  rm -rf "$OUT/torch_inside"
  run_step torch_inside 180 "$BUILD/bin/torchprof-run" -q -o "$OUT/torch_inside" -- \
    "$PY" "$GPU_DIR/torch_train.py" --torch-profiler "$OUT/torch_ref_inside.json"
  compare torch_inside "$OUT/torch_inside/summary.json" "$OUT/torch_ref_inside.json"
  verdicts second-client --summary "$OUT/torch_inside/summary.json" --inside "$OUT/torch_ref_inside.json" \
    --alone "$OUT/torch_ref.json" ${RC[torch_inside]:+--rc "${RC[torch_inside]}"}
}

# The same cases against the fake libcupti (no GPU): gpu_workload scripts stand for the programs.
check_cupti_cases_dry() {
  section "CUPTI cases (dry run: fake libcupti)"
  local wl="$BUILD/bin/gpu_workload" fake="$BUILD/lib/fake_cupti/libfake_cupti.so"
  if [[ ! -x $wl || ! -f $fake ]]; then
    log "FAIL dry run: $wl or $fake is not built (a build with TORCHPROF_BUILD_TESTS=ON)"
    return
  fi
  export TORCHPROF_CUPTI_LIB=$fake
  local k="kernel:_Z11spin_kernelx" eight="" mode
  for _ in 1 2 3 4 5 6 7 8; do eight+="$k:20ms ; "; done
  local -A script=([profiler-stop]="range:case{ ${eight}profiler_stop } ; sync" [no-sync-exit]="${eight% ; }")
  for mode in profiler-stop no-sync-exit; do
    printf '{"mode": "%s", "kernel": "spin_kernel(long long)", "launched": 8, "each_ns": 20000000}\n' "$mode" \
      >"$WORK/case_$mode.json"
    rm -rf "$OUT/cupti_$mode"
    run_step "cupti_$mode" 60 "$BUILD/bin/torchprof-run" -q -o "$OUT/cupti_$mode" -- "$wl" "${script[$mode]}"
    verdicts "$mode" --summary "$OUT/cupti_$mode/summary.json" --case "$WORK/case_$mode.json" \
      ${RC["cupti_$mode"]:+--rc "${RC["cupti_$mode"]}"}
  done
  # The launched count at the kill is not known here: only what came before 'ready' is checked.
  printf '{"mode": "sigkill", "kernel": "spin_kernel(long long)", "launched": null, "each_ns": 5000000}\n' \
    >"$WORK/case_sigkill.json"
  run_killed cupti_sigkill 2 "$OUT/cupti_sigkill" "$wl" \
    "repeat:20{ $k:5ms ; sync ; sleep:20ms } ; ready ; repeat:100000{ $k:5ms ; sync ; sleep:20ms }"
  verdicts sigkill --summary "$OUT/cupti_sigkill/summary.json" --case "$WORK/case_sigkill.json" \
    --rc "${RC[cupti_sigkill]}" --before 20
  # torch.profiler stands for a second CUPTI client, used as Kineto uses CUPTI.
  rm -rf "$OUT/torch_inside"
  run_step torch_inside 60 "$BUILD/bin/torchprof-run" -q -o "$OUT/torch_inside" -- "$wl" \
    "range:before{ $k:1ms } ; sync ; client_start ; range:inside{ $k:2ms ; $k:2ms } ; sync ; client_stop ;
     range:after{ $k:1ms } ; sync"
  verdicts second-client --summary "$OUT/torch_inside/summary.json" --launched "spin_kernel(long long)=4" \
    --rc "${RC[torch_inside]}"
  unset TORCHPROF_CUPTI_LIB
}

# One table of every PASS/FAIL line: check, verdict, detail.
verdict_table() {
  section "verdicts"
  grep -hE '^(PASS|FAIL)' "$REPORT" >"$OUT/verdicts.txt"
  {
    printf '%-44s %-7s %s\n' "check" "verdict" "detail"
    printf '%-44s %-7s %s\n' "-----" "-------" "------"
    sed -E 's/^(PASS|FAIL) ([^:]*): ?(.*)$/\2\t\1\t\3/' "$OUT/verdicts.txt" |
      awk -F'\t' '{ printf "%-44s %-7s %s\n", substr($1, 1, 44), $2, substr($3, 1, 120) }'
  } | tee -a "$REPORT"
}

main() {
  if ((DRY)); then
    log "dry run: no GPU; the CUPTI cases against the fake libcupti (build: $BUILD)"
    check_cupti_cases_dry
  else
    record_environment
    check_deps
    check_sample
    check_torch
    check_cupti_cases
  fi
  verdict_table
  log "failed steps: ${FAILED_STEPS[*]:-none}"
  log "$(grep -c '^FAIL' "$OUT/verdicts.txt") FAIL lines; full report: $REPORT"
  du -sh "$OUT" | tee -a "$REPORT"
}

main
exit 0
