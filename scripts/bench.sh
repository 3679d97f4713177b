#!/usr/bin/env bash
# Overhead and throughput figures, measured side by side in one run on this machine,
# printed as one table: hot path vs no tool and vs a bare injection (the floor),
# end-to-end slowdown, capture size, analysis speed and memory, collector ingest, and
# what is dropped (and the buffers' peak memory) at set rates with the default settings.
# Frames are delta-encoded (the default); rows marked "raw" run the same program with
# TORCHPROF_FRAME_ENCODING=raw (plain zstd, the encoding before the delta transform),
# as the baseline measured in the same run.
# Run by hand (not by ctest); it builds what it needs in BUILD_DIR first.
#
#   scripts/bench.sh [BUILD_DIR]        (default: build-bench, configured Release if new)
#
# Environment: QUICK=1 (sizes / 10), ANALYSIS_RANGES (default 10000000: the capture
# analysed for speed and peak RSS), TRACES=0 (no Kineto traces for that capture: for
# ANALYSIS_RANGES=100000000, whose traces would be ~20 GB), TORCH=0 (skip torch's own
# key_averages figures), ROUNDS (default 5: the side-by-side figures, the floor,
# torchprof's pair, uftrace's call and the end-to-end runs, are measured in this many
# rounds that alternate the tools, and each is given as the median with the range),
# KEEP=1 (keep the work directory; about 9 GB in $TMPDIR with the default sizes),
# SECTIONS (default 1,2,3,4,5,6: the sections to run; 3 reads captures that 1 makes),
# PRESSURE_RUNS (default 3: runs in a row of each rate, and of the flood, in section 6),
# BASELINE=DIR (the build directory of another torchprof, e.g. the commit before: its
# torchprof-run is run in each round of section 1 too, between the floor and this one,
# and its pair is given against the same floor).
# Per-event figures use CPU time (the programs measure it themselves): on a shared
# machine wall time varies with the load. The analysis's memory does not grow with the
# number of CPU events.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build-bench}
scale=1
[[ ${QUICK:-0} == 1 ]] && scale=10
pairs=$((2000000 / scale))
e2e_ranges=$((2000000 / scale))
analysis_ranges=${ANALYSIS_RANGES:-$((10000000 / scale))}
gpu_steps=$((2000 / scale))
flood_pairs=$((2000000 / scale))
rounds=${ROUNDS:-5}

# ---------- build ----------
# The benchmark programs, and the tests' fake libcupti and GPU workload for the GPU figures.
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake -S "$root" -B "$build" -DTORCHPROF_BUILD_BENCH=ON -DTORCHPROF_BUILD_TESTS=ON >/dev/null
targets=(torchprof torchprof-run torchprof_inject nvtx_pairs e2e_ranges step_ranges call_loop floor_inject_clock
         floor_inject_rdtsc analysis_bench ingest_bench rate_ranges)
have_gpu_workload=0
if grep -q '^build gpu_workload' "$build/build.ninja" 2>/dev/null || \
   grep -q 'gpu_workload' "$build/Makefile" 2>/dev/null; then
  targets+=(gpu_workload fake_cupti)
  have_gpu_workload=1
fi
cmake --build "$build" -j2 --target "${targets[@]}" >/dev/null

bin=$build/bin
bb=$build/bench
run_tool=$bin/torchprof-run
work=$(mktemp -d "${TMPDIR:-/tmp}/torchprof_bench.XXXXXX")
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT

# ---------- helpers ----------
# want N: section N is to run (SECTIONS, e.g. "1,6"; default every one)
want() { [[ ",${SECTIONS:-1,2,3,4,5,6}," == *",$1,"* ]]; }
rows=$work/rows
: >"$rows"
# row SECTION NAME VALUE UNIT [NOTE]
row() { printf '%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "${5:-}" >>"$rows"; }
# val FILE NAME: the value of a `name value unit` line
val() { awk -v n="$2" '$1 == n { print $2; exit }' "$1"; }
# calc EXPR: floating-point arithmetic, 4 significant digits
calc() { awk "BEGIN { printf \"%.4g\", $1 }"; }
# timed FILE CMD...: runs CMD, its stdout to FILE, and appends `wall_s`, `user_s`,
# `sys_s` and `max_rss_kb`
timed() {
  local out=$1
  shift
  /usr/bin/time -f 'wall_s %e s
user_s %U s
sys_s %S s
max_rss_kb %M KiB' -o "$out.time" "$@" >"$out"
  cat "$out.time" >>"$out"
}
# summary FIELD DIR: sums over processes of summary.json's FIELD (events|dropped)
summary() {
  /usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[2]+"/summary.json")); print(sum(p[sys.argv[1]] for p in s["processes"]))' "$1" "$2"
}
tool() { TORCHPROF_LOG_LEVEL=error "$run_tool" -q "$@"; }
# frame_bytes DIR: bytes of the Frame chunks (headers included) in DIR/capture.tprof,
# without the run info and Hellos (which carry the command line)
frame_bytes() {
  /usr/bin/python3 -c 'import struct,sys
d = open(sys.argv[1] + "/capture.tprof", "rb").read(); pos = 24; n = 0
head = 24 if struct.unpack_from("<I", d, 8)[0] >= 3 else 16  # version 3 on: an 8-byte mark first
while pos + head <= len(d):
    t, _, size, _ = struct.unpack_from("<IIII", d, pos + head - 16); pos += head + size; n += (head + size) if t == 3 else 0
print(n)' "$1"
}
# table_calls DIR: the calls of DIR/table.txt's rows, added up
table_calls() { awk '$NF ~ /^[0-9]+$/ { n += $NF } END { print n + 0 }' "$1/table.txt"; }
# med NAME BASE: "MEDIAN MIN MAX" of the `NAME value unit` lines of the rounds' files
# $work/BASE1 ... $work/BASE$rounds
med() {
  local i files=()
  for ((i = 1; i <= rounds; ++i)); do files+=("$work/$2$i"); done
  awk -v n="$1" '$1 == n { print $2 }' "${files[@]}" | sort -g |
    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[1], v[NR] }'
}
# spread MIN MAX: "MIN-MAX over N rounds"
spread() { echo "$1-$2 over $rounds rounds"; }
# size_ratio A B: capture.tprof of A over that of B (same events, other encodings)
size_ratio() { calc "$(stat -c %s "$1/capture.tprof") / $(stat -c %s "$2/capture.tprof")"; }

echo "torchprof bench: build $build, work $work" >&2

# ---------- 1. hot path ----------
if want 1; then
echo "[1/6] hot path: NVTX push+pop pairs" >&2
"$bb/nvtx_pairs" $((pairs * 5)) 1 >"$work/none"
NVTX_INJECTION64_PATH=$bb/libfloor_inject_clock.so "$bb/nvtx_pairs" "$pairs" 1 >"$work/floor_clock"
NVTX_INJECTION64_PATH=$bb/libfloor_inject_clock.so "$bb/nvtx_pairs" "$pairs" 2 >"$work/floor_clock2"
# Default ring (1 MiB per thread): drops when the flusher falls behind; a ring that
# holds every record shows the cost of writing each one.
tool -o "$work/hot1" -- "$bb/nvtx_pairs" "$pairs" 1 >"$work/tp1"
big_kb=$(( (pairs * 2 * 32 * 2) / 1024 + 1024 ))
# Side by side, in alternating rounds: the rdtsc floor, torchprof with a ring that
# holds it all, and uftrace on a -pg build of the same kind of loop (when installed).
have_uftrace=0
if command -v uftrace >/dev/null 2>&1; then
  have_uftrace=1
  cc -O2 -pg -o "$work/call_loop_pg" "$root/bench/call_loop.c"
  calls=$((pairs / 2))
fi
# The floor's array, sized to hold every record of the run as that ring does (fresh
# memory throughout, where the default array of 2^20 events wraps and is reused).
floor_all=1024
while ((floor_all < pairs * 2)); do floor_all=$((floor_all * 2)); done
# A run ten times longer, where the start (the first 20 ms read the clock with
# clock_gettime, until the TSC is calibrated) and the first touch of fresh memory
# weigh little: the floor reuses its 16 MiB array, torchprof a 16 MiB ring that the
# flusher drains as it goes (what a long program sees with TORCHPROF_BUFFER_KB=16384).
steady_pairs=$((pairs * 10))
for ((i = 1; i <= rounds; ++i)); do
  NVTX_INJECTION64_PATH=$bb/libfloor_inject_rdtsc.so "$bb/nvtx_pairs" "$pairs" 1 >"$work/floor_rdtsc$i"
  FLOOR_EVENTS=$floor_all NVTX_INJECTION64_PATH=$bb/libfloor_inject_rdtsc.so "$bb/nvtx_pairs" "$pairs" 1 \
    >"$work/floor_rdtsc_all$i"
  if [[ -n ${BASELINE:-} ]]; then
    rm -rf "$work/hot1base"
    TORCHPROF_BUFFER_KB=$big_kb TORCHPROF_LOG_LEVEL=error "$BASELINE/bin/torchprof-run" -q -o "$work/hot1base" -- \
      "$bb/nvtx_pairs" "$pairs" 1 >"$work/tp1base$i"
  fi
  rm -rf "$work/hot1big"
  TORCHPROF_BUFFER_KB=$big_kb tool -o "$work/hot1big" -- "$bb/nvtx_pairs" "$pairs" 1 >"$work/tp1big$i"
  NVTX_INJECTION64_PATH=$bb/libfloor_inject_rdtsc.so "$bb/nvtx_pairs" "$steady_pairs" 1 >"$work/floor_steady$i"
  rm -rf "$work/hot_steady"
  TORCHPROF_BUFFER_KB=16384 tool --table-only -o "$work/hot_steady" -- "$bb/nvtx_pairs" "$steady_pairs" 1 \
    >"$work/tp_steady$i"
  echo "ranges $(table_calls "$work/hot_steady")" >>"$work/tp_steady$i"
  if [[ -n ${BASELINE:-} ]]; then
    rm -rf "$work/hot_steady_base"
    TORCHPROF_BUFFER_KB=16384 TORCHPROF_LOG_LEVEL=error "$BASELINE/bin/torchprof-run" -q --table-only \
      -o "$work/hot_steady_base" -- "$bb/nvtx_pairs" "$steady_pairs" 1 >"$work/tp_steady_base$i"
    echo "ranges $(table_calls "$work/hot_steady_base")" >>"$work/tp_steady_base$i"
  fi
  if [[ $have_uftrace == 1 ]]; then
    (cd "$work" && "$work/call_loop_pg" "$calls" >"$work/uf_none$i")  # its gmon.out stays in $work
    rm -rf "$work/uftrace.data"
    (cd "$work" && uftrace record -d "$work/uftrace.data" "$work/call_loop_pg" "$calls" >"$work/uf_rec$i")
    echo "uf_added $(calc "$(val "$work/uf_rec$i" call_ns) - $(val "$work/uf_none$i" call_ns)") ns/call" >"$work/uf_add$i"
  fi
done
cp "$work/tp1big$rounds" "$work/tp1big"
TORCHPROF_BUFFER_KB=$big_kb tool -o "$work/hot2big" -- "$bb/nvtx_pairs" "$pairs" 2 >"$work/tp2big"
TORCHPROF_FRAME_ENCODING=raw TORCHPROF_BUFFER_KB=$big_kb tool -o "$work/hot1raw" -- "$bb/nvtx_pairs" "$pairs" 1 >"$work/tp1raw"
TORCHPROF_CLOCK=monotonic TORCHPROF_BUFFER_KB=$big_kb tool -o "$work/hot1mono" -- "$bb/nvtx_pairs" "$pairs" 1 >"$work/tp1mono"

none=$(val "$work/none" pair_ns)
fc=$(val "$work/floor_clock" pair_ns)
read -r fr fr_min fr_max <<<"$(med pair_ns floor_rdtsc)"
read -r fra fra_min fra_max <<<"$(med pair_ns floor_rdtsc_all)"
fc2=$(val "$work/floor_clock2" pair_ns_max)
tp1=$(val "$work/tp1" pair_ns)
read -r tpb tpb_min tpb_max <<<"$(med pair_ns tp1big)"
tp2=$(val "$work/tp2big" pair_ns_max)
row hot no_tool "$none" ns/pair "NVTX with no injection"
row hot floor_clock_gettime "$fc" ns/pair "bare injection, (ts, name ptr) to a TLS array"
row hot floor_rdtsc "$fr" ns/pair "same with rdtsc; median, $(spread "$fr_min" "$fr_max")"
row hot floor_rdtsc_holds_all "$fra" ns/pair "same, its array holding every record ($floor_all events, no reuse); median, $(spread "$fra_min" "$fra_max")"
row hot torchprof_default_ring "$tp1" ns/pair "x$(calc "$tp1 / $fc") floor_clock, x$(calc "$tp1 / $fr") floor_rdtsc; dropped $(summary dropped "$work/hot1") records"
row hot torchprof_ring_fits_all "$tpb" ns/pair "median, $(spread "$tpb_min" "$tpb_max"); x$(calc "$tpb / $fc") floor_clock, x$(calc "$tpb / $fr") floor_rdtsc, x$(calc "$tpb / $fra") floor_rdtsc_holds_all; dropped $(summary dropped "$work/hot1big")"
if [[ -n ${BASELINE:-} ]]; then
  read -r tpo tpo_min tpo_max <<<"$(med pair_ns tp1base)"
  row hot baseline_ring_fits_all "$tpo" ns/pair "$BASELINE, the same rounds: median, $(spread "$tpo_min" "$tpo_max"); x$(calc "$tpo / $fr") floor_rdtsc; this build x$(calc "$tpb / $tpo") of it"
fi
read -r fs fs_min fs_max <<<"$(med pair_ns floor_steady)"
read -r tps tps_min tps_max <<<"$(med pair_ns tp_steady)"
row hot floor_rdtsc_long "$fs" ns/pair "the rdtsc floor over $steady_pairs pairs, its 16 MiB array reused; median, $(spread "$fs_min" "$fs_max")"
row hot torchprof_steady "$tps" ns/pair "$steady_pairs pairs, a 16 MiB buffer drained as it goes: x$(calc "$tps / $fs") floor_rdtsc_long; median, $(spread "$tps_min" "$tps_max"); ranges recorded $(val "$work/tp_steady$rounds" ranges) of $((steady_pairs + 1))"
if [[ -n ${BASELINE:-} ]]; then
  read -r tso tso_min tso_max <<<"$(med pair_ns tp_steady_base)"
  row hot baseline_steady "$tso" ns/pair "$BASELINE, the same rounds: x$(calc "$tso / $fs") floor_rdtsc_long; median, $(spread "$tso_min" "$tso_max"); this build x$(calc "$tps / $tso") of it; ranges recorded $(val "$work/tp_steady_base$rounds" ranges) of $((steady_pairs + 1))"
fi
tpm=$(val "$work/tp1mono" pair_ns)
row hot torchprof_clock_gettime "$tpm" ns/pair "TORCHPROF_CLOCK=monotonic (clock_gettime per record), ring fits all: the TSC clock above is x$(calc "$tpb / $tpm") of it"
row hot torchprof_process_cpu "$(val "$work/tp1big" process_cpu_ns_per_pair)" ns/pair "all threads incl. flusher, during the loop"
# The flusher's share: process CPU minus the program thread's own, per pair (2 records).
fl_delta=$(calc "$(val "$work/tp1big" process_cpu_ns_per_pair) - $(val "$work/tp1big" pair_ns)")
fl_raw=$(calc "$(val "$work/tp1raw" process_cpu_ns_per_pair) - $(val "$work/tp1raw" pair_ns)")
row hot flusher_cpu "$(calc "$fl_delta / 2")" ns/record "delta+zstd; raw zstd $(calc "$fl_raw / 2") ns/record in this run: x$(calc "$fl_delta / $fl_raw")"
row hot floor_clock_2_threads "$fc2" ns/pair "slowest thread; x$(calc "$fc2 / $fc") vs 1 thread"
row hot torchprof_2_threads "$tp2" ns/pair "slowest thread; x$(calc "$tp2 / $tpb") vs 1 thread; dropped $(summary dropped "$work/hot2big")"
# Paused (torchprof-run --paused): the cost of the recording switch, against no tool in
# the same rounds. Goal: at most 1.1x no tool plus the floor's branch.
echo "[1b/5] hot path while paused" >&2
for ((i = 1; i <= rounds; ++i)); do
  "$bb/nvtx_pairs" "$pairs" 1 >"$work/none_round$i"
  tool --paused -o "$work/paused$i" -- "$bb/nvtx_pairs" "$pairs" 1 >"$work/tp_paused$i"
  NVTX_INJECTION64_PATH=$bb/libfloor_inject_rdtsc.so "$bb/nvtx_pairs" "$pairs" 1 >"$work/floor_paused_round$i"
  ((i == rounds)) || rm -rf "$work/paused$i"
done
read -r pn pn_min pn_max <<<"$(med pair_ns none_round)"
read -r pp pp_min pp_max <<<"$(med pair_ns tp_paused)"
read -r pf pf_min pf_max <<<"$(med pair_ns floor_paused_round)"
row hot no_tool_paused_rounds "$pn" ns/pair "no injection, alternating with the paused runs; median, $(spread "$pn_min" "$pn_max")"
row hot torchprof_paused "$pp" ns/pair "--paused, never started: x$(calc "$pp / $pn") no_tool (+$(calc "$pp - $pn") ns/pair), x$(calc "$pp / $pf") floor_rdtsc ($pf); median, $(spread "$pp_min" "$pp_max"); events recorded $(summary events "$work/paused$rounds")"
if [[ $have_uftrace == 1 ]]; then
  read -r uf_add uf_min uf_max <<<"$(med uf_added uf_add)"
  uf_bytes=$(du -sb "$work/uftrace.data" | cut -f1)
  row hot uftrace_added "$uf_add" ns/call "uftrace record on a -pg build, median, $(spread "$uf_min" "$uf_max"); $(calc "$uf_bytes / ($calls * 2)") B/event on disk; torchprof's pair x$(calc "$tpb / $uf_add") of it, its slowest round x$(calc "$tpb_max / $uf_min") uftrace's fastest"
else
  row hot uftrace_added 95 ns/call "uftrace not installed (apt-get install uftrace): REFERENCE.md's figure (15.5 B/event)"
fi
fi  # section 1

# ---------- 2. end to end ----------
if want 2; then
echo "[2/6] end to end: $e2e_ranges ranges with busy work" >&2
for ((i = 1; i <= rounds; ++i)); do
  timed "$work/e2e_none$i" "$bb/e2e_ranges" "$e2e_ranges"
  timed "$work/e2e_tp$i" "$run_tool" -q -o "$work/e2e$i" -- "$bb/e2e_ranges" "$e2e_ranges"
  timed "$work/e2e_raw$i" env TORCHPROF_FRAME_ENCODING=raw "$run_tool" -q -o "$work/e2e_raw_out$i" -- \
    "$bb/e2e_ranges" "$e2e_ranges"
  ((i == 1)) || rm -rf "$work/e2e$i" "$work/e2e_raw_out$i"  # the figures are in the stdout files
done
# Medians over the rounds: on a shared machine one run can be off by 30% either way.
median_of() { med "$2" "$1" | cut -d' ' -f1; }
n_cpu=$(median_of e2e_none loop_cpu_s); t_cpu=$(median_of e2e_tp loop_cpu_s)
n_loop=$(median_of e2e_none loop_s); t_loop=$(median_of e2e_tp loop_s)
n_wall=$(median_of e2e_none wall_s); t_wall=$(median_of e2e_tp wall_s)
row e2e rate_no_tool "$(calc "$e2e_ranges / $n_cpu")" ranges/s "per CPU second, no tool"
r_cpu=$(median_of e2e_raw loop_cpu_s)
row e2e loop_cpu "$t_cpu" s "no tool $n_cpu s: slowdown $(calc "($t_cpu / $n_cpu - 1) * 100")% (process CPU, flusher included); raw zstd frames $r_cpu s: $(calc "($r_cpu / $n_cpu - 1) * 100")%"
row e2e loop_wall "$t_loop" s "no tool $n_loop s: slowdown $(calc "($t_loop / $n_loop - 1) * 100")%"
row e2e process_wall "$t_wall" s "no tool $n_wall s: $(calc "($t_wall / $n_wall - 1) * 100")% (start, collection, analysis, files)"
row e2e dropped "$(summary dropped "$work/e2e1")" records "ranges decoded $(summary events "$work/e2e1") of $((e2e_ranges + 1))"
fi  # section 2

# ---------- 3. capture size ----------
if want 3; then
echo "[3/6] capture size" >&2
"$bb/analysis_bench" "$work/hot1big" "$work/an_hot" >"$work/size_nvtx"
nvtx_ratio=$(size_ratio "$work/hot1raw" "$work/hot1big")
row size nvtx_capture "$(val "$work/size_nvtx" capture_bytes_per_event)" B/event "capture.tprof per NVTX range (push+pop), delta frames; raw zstd frames $(calc "$nvtx_ratio * $(val "$work/size_nvtx" capture_bytes_per_event)") B: x$nvtx_ratio larger"
row size nvtx_kineto_json "$(val "$work/size_nvtx" kineto_bytes_per_event)" B/event "Kineto JSON for the same ranges; x$(calc "$(val "$work/size_nvtx" kineto_bytes_per_event) / $(val "$work/size_nvtx" capture_bytes_per_event)") the capture"
if [[ $have_gpu_workload == 1 ]]; then
  step='range:step{kernel:gemm_kernel:20us;kernel:relu_kernel:5us;memcpy:htod:65536:3us;kernel:softmax_kernel:4us:stream=9;sync}'
  gpu_args=()
  for ((i = 0; i < gpu_steps; ++i)); do gpu_args+=("$step"); done
  TORCHPROF_CUPTI_LIB=$(find "$build" -name libfake_cupti.so | head -1) \
    tool -o "$work/gpu" -- "$bin/gpu_workload" "${gpu_args[@]}" >/dev/null
  TORCHPROF_CUPTI_LIB=$(find "$build" -name libfake_cupti.so | head -1) TORCHPROF_FRAME_ENCODING=raw \
    tool -o "$work/gpu_raw" -- "$bin/gpu_workload" "${gpu_args[@]}" >/dev/null
  "$bb/analysis_bench" "$work/gpu" "$work/an_gpu" >"$work/size_gpu"
  gpu_ev=$(val "$work/size_gpu" events)
  gpu_fd=$(frame_bytes "$work/gpu"); gpu_fr=$(frame_bytes "$work/gpu_raw")
  row size gpu_capture "$(val "$work/size_gpu" capture_bytes_per_event)" B/event "fake GPU: ranges, API calls, kernels, memcpys ($gpu_ev events), whole file (the command line is stored twice); raw zstd frames x$(size_ratio "$work/gpu_raw" "$work/gpu")"
  row size gpu_frames "$(calc "$gpu_fd / $gpu_ev")" B/event "the frames alone, delta; raw zstd frames $(calc "$gpu_fr / $gpu_ev") B/event: x$(calc "$gpu_fr / $gpu_fd") larger"
  row size gpu_kineto_json "$(val "$work/size_gpu" kineto_bytes_per_event)" B/event "x$(calc "$(val "$work/size_gpu" kineto_bytes_per_event) / $(val "$work/size_gpu" capture_bytes_per_event)") the capture"
else
  row size gpu_capture - - "gpu_workload not built (tests off)"
fi
fi  # section 3

# ---------- 4. analysis ----------
if want 4; then
echo "[4/6] analysis of $analysis_ranges ranges" >&2
work_iters=40
# A ring that holds the whole capture run: the figure is about analysis, not drops.
TORCHPROF_BUFFER_KB=$(( analysis_ranges * 2 * 32 / 1024 + 65536 > 1048576 ? 1048576 : analysis_ranges * 2 * 32 / 1024 + 65536 )) tool --table-only -o "$work/big" -- "$bb/e2e_ranges" "$analysis_ranges" "$work_iters" >/dev/null
# engine CAPTURE NAME: the three ways the engine reads a capture, each in a process of
# its own (its own peak RSS): the table alone, every output but the traces, and (TRACES=1)
# with the traces; rows named NAME_*.
engine() {
  local cap=$1 name=$2 note=$3
  "$bb/analysis_bench" "$cap" "$work/an_$name" --table >"$work/an_${name}_table"
  "$bb/analysis_bench" "$cap" "$work/an_$name" --no-traces >"$work/an_${name}_report"
  local t=$work/an_${name}_table r=$work/an_${name}_report
  row analysis "${name}_to_table" "$(val "$t" ns_per_event)" ns/event "$note, $(val "$t" events) events: capture -> table, CPU time; peak RSS $(val "$t" peak_rss) MiB ($(val "$t" peak_rss_per_event) B/event)"
  row analysis "${name}_to_report" "$(val "$r" ns_per_event)" ns/event "every output but the traces (table, summary.json and its overview, report.html, stacks); peak RSS $(val "$r" peak_rss) MiB ($(val "$r" peak_rss_per_event) B/event)"
  if [[ ${TRACES:-1} == 1 ]]; then
    "$bb/analysis_bench" "$cap" "$work/an_$name" >"$work/an_${name}_traces"
    local k=$work/an_${name}_traces
    row analysis "${name}_with_traces" "$(val "$k" ns_per_event)" ns/event "the same with the Kineto traces ($(val "$k" kineto_bytes_per_event) B/event): x$(val "$k" vs_write_floor) the time to write their bytes alone ($(val "$k" write_floor_s) s, the bench's write_floor); peak RSS $(val "$k" peak_rss) MiB"
  fi
  rm -rf "$work/an_$name"
}
if [[ -d $work/hot1big ]]; then engine "$work/hot1big" flood "the 2M-pair flood of section 1"; fi
engine "$work/big" ranges "$analysis_ranges NVTX ranges (e2e_ranges)"
if [[ $have_gpu_workload == 1 ]]; then
  gpu_big=$((400000 / scale))
  TORCHPROF_CUPTI_LIB=$(find "$build" -name libfake_cupti.so | head -1) TORCHPROF_BUFFER_KB=65536 \
    tool -o "$work/gpu_big" --table-only -- "$bin/gpu_workload" \
    "repeat:$gpu_big{range:step{kernel:gemm_kernel:20us;kernel:relu_kernel:5us;memcpy:htod:65536:3us;kernel:softmax_kernel:4us:stream=9}};sync" >/dev/null
  engine "$work/gpu_big" gpu "fake GPU (ranges, API calls, kernels, copies)"
  rm -rf "$work/gpu_big"
fi
# A training run's shape as the Python bootstrap records it: each step a start/end
# range written once it ended, 50 ranges inside (two passes: the steps are learnt first).
after_steps=$((200000 / scale))
TORCHPROF_BUFFER_KB=65536 tool -o "$work/after" --table-only -- "$bb/step_ranges" "$after_steps" 50 after >/dev/null
engine "$work/after" steps "$after_steps steps written as the bootstrap writes them"
rm -rf "$work/after"
if [[ ${TORCH:-1} == 1 ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 "$root/bench/torch_key_averages.py" $((20000 / scale)) >"$work/torch" 2>/dev/null
  tk=$(val "$work/torch" torch_table_us_per_event)
  row analysis torch_key_averages "$(val "$work/torch" torch_table_events_per_s)" events/s "torch $(val "$work/torch" torch_version) key_averages().table(): $tk us/event; torchprof's table x$(calc "$tk * 1000 / $(val "$work/an_ranges_table" ns_per_event)") faster"
  row analysis torch_export_chrome "$(val "$work/torch" torch_export_us_per_event)" us/event "$(val "$work/torch" torch_trace_bytes_per_event) B/event; torch adds $(val "$work/torch" torch_added_per_op) us per torch.add"
else
  row analysis torch_key_averages 15 us/event "torch not measured: REFERENCE.md's figure"
fi
row analysis note - - "100M ranges: ANALYSIS_RANGES=100000000 TRACES=0 (their traces would be ~20 GB)"
# Many cycles: a saved trace every 3 steps.
cycle_steps=$((20000 / scale))
TORCHPROF_BUFFER_KB=65536 tool --schedule wait=1,warmup=1,active=1 -o "$work/steps" -- "$bb/step_ranges" "$cycle_steps" 50 >"$work/steps_prog"
timed "$work/steps_report" "$bin/torchprof" report "$work/steps" -q --schedule wait=1,warmup=1,active=1 -o "$work/steps_out"
steps_cpu=$(calc "$(val "$work/steps_report" user_s) + $(val "$work/steps_report" sys_s)")
row analysis many_cycles "$(calc "$(val "$work/steps_prog" events) / $steps_cpu")" events/s "torchprof report, $cycle_steps steps x 51 ranges, $(ls "$work/steps_out/traces" | wc -l) traces: $steps_cpu s CPU, peak RSS $(calc "$(val "$work/steps_report" max_rss_kb) / 1024") MiB"
rm -rf "$work/steps" "$work/steps_out"
[[ ${KEEP:-0} == 1 ]] || rm -rf "$work/big"
fi  # section 4

# ---------- 5. collector ingest ----------
if want 5; then
echo "[5/6] collector ingest: two flooding processes" >&2
tool -o "$work/flood" -- /bin/sh -c \
  "'$bb/nvtx_pairs' $flood_pairs 1 > '$work/flood_a' & '$bb/nvtx_pairs' $flood_pairs 1 > '$work/flood_b' & wait"
produced=$((2 * 2 * (flood_pairs + 1)))
dropped=$(summary dropped "$work/flood")
wall_a=$(val "$work/flood_a" pair_wall_ns); wall_b=$(val "$work/flood_b" pair_wall_ns)
loop_s=$(calc "($wall_a > $wall_b ? $wall_a : $wall_b) * $flood_pairs / 1e9")
row ingest produced "$(calc "$produced / $loop_s")" records/s "2 processes x $flood_pairs pairs in $loop_s s (wall)"
row ingest delivered "$(calc "($produced - $dropped) / $loop_s")" records/s "over the same time"
row ingest dropped "$dropped" records "$(calc "$dropped * 100 / $produced")% of $produced; ranges decoded $(summary events "$work/flood")"
TORCHPROF_FRAME_ENCODING=raw tool -o "$work/flood_raw" -- /bin/sh -c \
  "'$bb/nvtx_pairs' $flood_pairs 1 > '$work/flood_ra' & '$bb/nvtx_pairs' $flood_pairs 1 > '$work/flood_rb' & wait"
dropped_raw=$(summary dropped "$work/flood_raw")
wall_a=$(val "$work/flood_ra" pair_wall_ns); wall_b=$(val "$work/flood_rb" pair_wall_ns)
loop_raw=$(calc "($wall_a > $wall_b ? $wall_a : $wall_b) * $flood_pairs / 1e9")
row ingest raw_frames "$(calc "($produced - $dropped_raw) / $loop_raw")" records/s "delivered with raw zstd frames: produced $(calc "$produced / $loop_raw")/s, dropped $dropped_raw ($(calc "$dropped_raw * 100 / $produced")%)"
# The collector alone: ready-made frames from 2 senders, its CPU time per record.
ingest_frames=$((400 / scale))
"$bb/ingest_bench" 2 "$ingest_frames" delta >"$work/ingest"
"$bb/ingest_bench" 2 "$ingest_frames" raw >"$work/ingest_raw"
cap=$(val "$work/ingest" records_per_collector_cpu_s)
row ingest collector_capacity "$cap" records/cpu-s "collector event loop alone, delta frames; x$(calc "$cap * $loop_s / $produced") the rate 2 flooding processes produce"
row ingest collector_capacity_raw "$(val "$work/ingest_raw" records_per_collector_cpu_s)" records/cpu-s "same with raw zstd frames ($(val "$work/ingest_raw" wire_bytes_per_record) B/record on the wire vs $(val "$work/ingest" wire_bytes_per_record))"
fi  # section 5

# ---------- 6. buffers under pressure ----------
if want 6; then
echo "[6/6] buffers: drops and peak memory at set rates, default settings" >&2
pressure_runs=${PRESSURE_RUNS:-3}
rate_n=$((2000000 / scale))
# buffer_figures DIR: "DROPPED PEAK_MIB CAP_REACHED" of DIR/summary.json (every process;
# "-" for what an older torchprof does not say)
buffer_figures() {
  /usr/bin/python3 -c 'import json,sys
s = json.load(open(sys.argv[1] + "/summary.json")); ps = s["processes"]
has = all("buffer_peak_bytes" in p for p in ps)
print(sum(p["dropped"] for p in ps), "%.1f" % (max(p["buffer_peak_bytes"] for p in ps) / 1048576) if has else "-",
      ("yes" if any(p["buffer_cap_reached"] for p in ps) else "no") if has else "-")' "$1"
}
# pressure NAME RECORDS CMD...: runs CMD under torchprof-run PRESSURE_RUNS times in a row (and
# under BASELINE's, alternating) and adds a row each: the drop % of each run (of RECORDS
# records), the buffers' peak MiB, whether the cap was reached, the segments the program's
# threads had to map themselves (no spare ready), the rate achieved, the load average
pressure() {
  local name=$1 records=$2 i k d p c r run_tool_k
  shift 2
  local -A drops=() peaks=() caps=() rates=() loads=() maps=()
  local kinds=(this)
  [[ -n ${BASELINE:-} ]] && kinds+=(baseline)
  for ((i = 1; i <= pressure_runs; ++i)); do
    for k in "${kinds[@]}"; do
      run_tool_k=$run_tool
      [[ $k == baseline ]] && run_tool_k=$BASELINE/bin/torchprof-run
      rm -rf "$work/pressure"
      "$run_tool_k" -q --log-level info -o "$work/pressure" -- "$@" >"$work/pressure_out" 2>"$work/pressure_err"
      read -r d p c <<<"$(buffer_figures "$work/pressure")"
      # the library's own account at exit: segments the program's threads mapped themselves
      maps[$k]+="${maps[$k]:+ }$(sed -n 's/.*, \([0-9]*\) segments mapped by program threads.*/\1/p' \
        "$work/pressure_err" | awk '{ n += $1 } END { print NR ? n : "-" }')"
      drops[$k]+="${drops[$k]:+ }$(calc "$d * 100 / $records")"
      peaks[$k]+="${peaks[$k]:+ }$p"
      caps[$k]+="${caps[$k]:+ }$c"
      loads[$k]+="${loads[$k]:+ }$(cut -d' ' -f1 /proc/loadavg)"
      r=$(val "$work/pressure_out" ranges_per_s)
      [[ -n $r ]] && rates[$k]+="${rates[$k]:+ }$(calc "$r / 1e6")M"
    done
  done
  for k in "${kinds[@]}"; do
    local label=$name
    [[ $k == baseline ]] && label+="_baseline"
    row buffers "$label" "${drops[$k]}" "% dropped" \
      "peak buffers ${peaks[$k]} MiB; cap reached: ${caps[$k]}; segments mapped by the program's threads: ${maps[$k]}${rates[$k]:+; achieved ${rates[$k]} ranges/s}; load ${loads[$k]}"
  done
}
for rate in 1000000 2500000 5000000; do
  for threads in 1 2; do
    pressure "ranges_$(calc "$rate / 1e6")M_per_s_${threads}t" $((2 * rate_n)) "$bb/rate_ranges" "$rate_n" "$rate" "$threads"
  done
done
pressure "flood_${flood_pairs}_pairs" $((2 * (flood_pairs + 1))) "$bb/nvtx_pairs" "$flood_pairs" 1
pressure "flood_${flood_pairs}_pairs_2t" $((2 * 2 * (flood_pairs / 2 + 1))) "$bb/nvtx_pairs" $((flood_pairs / 2)) 2
row buffers note - - "$pressure_runs runs in a row each, default settings (TORCHPROF_BUFFER_LIMIT 256 MiB); rate rows: $rate_n ranges in all, the rate shared by the threads"
fi  # section 6

# ---------- table ----------
load=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo
echo "machine: nproc $(nproc), $cpu, load average $load, $(uname -r)"
{
  echo "section|figure|value|unit|ratio / note"
  echo "-------|------|-----|----|------------"
  cat "$rows"
} | column -t -s '|'
