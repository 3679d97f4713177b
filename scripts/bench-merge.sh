#!/usr/bin/env bash
# The merge of many ranks: RANKS synthetic ranks (bench/rank_collectives: steps of NVTX
# ranges and an nccl:all_reduce whose ends line up, one rank late), each recorded by its
# own torchprof-run, then merged by `torchprof report` with 1 analysis job and with one
# per CPU, side by side. Prints `name value unit` lines: captures' size, wall time and
# peak memory of each merge, time per rank, and the straggler the merge names (it must
# be LATE_RANK). Run by hand (not by ctest).
#
#   scripts/bench-merge.sh [BUILD_DIR]     (default: build; it must have TORCHPROF_BUILD_BENCH=ON)
#
# Environment: RANKS (default 64), STEPS (default 20), RANGES (per step, default 20),
# PERIOD_MS (a step, default 150: every rank must keep the pace on few CPUs), LATE_MS
# (how much longer LATE_RANK works per step, default 40; many ranks on few CPUs are late
# by some ms each now and then),
# LATE_RANK (default 5), KEEP=1 (keep the work directory).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
ranks=${RANKS:-64}
steps=${STEPS:-20}
ranges=${RANGES:-20}
period=${PERIOD_MS:-150}
late_ms=${LATE_MS:-40}
late=${LATE_RANK:-5}
run=$build/bin/torchprof-run
report=$build/bin/torchprof
program=$build/bench/rank_collectives
for f in "$run" "$report" "$program"; do
  [[ -x $f ]] || { echo "bench-merge: $f is not built (configure with -DTORCHPROF_BUILD_BENCH=ON)" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/tp-bench-merge.XXXXXX")
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT

# Every rank starts at the same moment, once all have started, and steps every PERIOD_MS.
start=$(( $(date +%s%N) + 2000000000 + ranks * 30000000 ))
for ((r = 0; r < ranks; ++r)); do
  RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$((r % 8)) LATE_RANK=$late \
    "$run" -q -o "$work/r$r" -- "$program" "$steps" "$ranges" "$period" 20 "$late_ms" "$start" >/dev/null &
done
wait
inputs=()
for ((r = 0; r < ranks; ++r)); do inputs+=("$work/r$r"); done
bytes=$(cat "$work"/r*/capture.tprof | wc -c)
echo "ranks $ranks"
echo "events_per_rank $((steps * (ranges + 2)))"
echo "capture_bytes_total $bytes"

merge() {  # jobs name
  local out=$work/merged_$2
  local t0 t1
  t0=$(date +%s%N)
  TORCHPROF_JOBS=$1 /usr/bin/time -f "%M" -o "$work/rss_$2" "$report" report "${inputs[@]}" -q -o "$out"
  t1=$(date +%s%N)
  local ms=$(( (t1 - t0) / 1000000 ))
  echo "merge_${2}_wall_ms $ms"
  echo "merge_${2}_ms_per_rank $(awk -v ms="$ms" -v n="$ranks" 'BEGIN { printf "%.1f", ms / n }')"
  echo "merge_${2}_peak_rss_kib $(cat "$work/rss_$2")"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['ranks']; print('merge_${2}_straggler', ','.join(r['stragglers']) or 'none', r['straggler_by'].replace(' ', '_'))" "$out/summary.json"
}
cpus=$(nproc)
merge 1 jobs1
merge "$cpus" "jobs$cpus"
