#!/usr/bin/env bash
# `torchprof export --type sqlite` against SQLite's own insert speed, in one run: RANGES
# NVTX push/pop ranges (bench/nvtx_pairs, recorded by torchprof-run) exported all in
# (read, decode, insert, indexes), and, as the floor, the sqlite3 command line inserting
# as many rows of the same width into one table by itself and indexing them. Prints
# `name value unit` lines: wall and CPU time of each, ns per range, rows/s, and the
# database's bytes per event. Best of ROUNDS. Run by hand (not by ctest).
#
#   scripts/bench-sqlite.sh [BUILD_DIR]     (default: build; it must have TORCHPROF_BUILD_BENCH=ON)
#
# Environment: RANGES (default 1000000), ROUNDS (default 3), KEEP=1 (keep the work directory).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
ranges=${RANGES:-1000000}
rounds=${ROUNDS:-3}
run=$build/bin/torchprof-run
tool=$build/bin/torchprof
program=$build/bench/nvtx_pairs
for f in "$run" "$tool" "$program"; do
  [[ -x $f ]] || { echo "bench-sqlite: $f is not built (configure with -DTORCHPROF_BUILD_BENCH=ON)" >&2; exit 2; }
done
command -v sqlite3 > /dev/null || { echo "bench-sqlite: needs the sqlite3 command line (apt-get install sqlite3)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-sqlite.XXXXXX")
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT

"$run" -q -o "$work/run" -- "$program" "$ranges" 1 > /dev/null
events=$(python3 -c "import json,sys; print(sum(p['events'] for p in json.load(open(sys.argv[1]))['processes']))" "$work/run/summary.json")

# Seconds of wall and CPU time (user + system) of a command, as "wall cpu".
timed() {
  local out
  out=$( { /usr/bin/env TIMEFORMAT='%R %U %S' bash -c 'time "$@" > /dev/null 2>&1' _ "$@"; } 2>&1 | tail -1)
  awk '{printf "%.3f %.3f\n", $1, $2 + $3}' <<< "$out"
}

best_export="" best_floor=""
for ((r = 0; r < rounds; ++r)); do
  rm -f "$work/run/capture.sqlite" "$work/floor.sqlite"
  t=$(timed "$tool" export --type sqlite -q "$work/run")
  [[ -z $best_export || $(awk -v a="$t" -v b="$best_export" 'BEGIN{split(a,x," ");split(b,y," ");print (x[1]<y[1])}') == 1 ]] &&
    best_export=$t
  # The floor: as many rows of NVTX_EVENTS' busy columns, made by SQLite itself in one
  # transaction with the same pragmas, then one index.
  t=$(timed sqlite3 "$work/floor.sqlite" "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
      PRAGMA locking_mode=EXCLUSIVE; BEGIN;
      CREATE TABLE t (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
        category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
        domainId INTEGER);
      WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < $ranges - 1)
        INSERT INTO t SELECT 1796000000000000000 + x * 100, 1796000000000000000 + x * 100 + 50, 59, NULL, NULL,
          NULL, 'aten::linear', 281925562427625, NULL, NULL, 0 FROM c;
      CREATE INDEX t_thread_start ON t (globalTid, start); COMMIT;")
  [[ -z $best_floor || $(awk -v a="$t" -v b="$best_floor" 'BEGIN{split(a,x," ");split(b,y," ");print (x[1]<y[1])}') == 1 ]] &&
    best_floor=$t
done
bytes=$(stat -c %s "$work/run/capture.sqlite")
floor_bytes=$(stat -c %s "$work/floor.sqlite")
nvtx=$(sqlite3 "$work/run/capture.sqlite" "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59")
read -r ew ec <<< "$best_export"
read -r fw fc <<< "$best_floor"
awk -v ranges="$ranges" -v nvtx="$nvtx" -v events="$events" -v ew="$ew" -v ec="$ec" -v fw="$fw" -v fc="$fc" \
    -v bytes="$bytes" -v fbytes="$floor_bytes" 'BEGIN {
  printf "ranges %d\nnvtx_rows %d\ncapture_events %d\n", ranges, nvtx, events
  printf "export_wall %.3f s\nexport_cpu %.3f s\nexport_ns_per_range %.0f ns\nexport_rows_per_s %.0f rows/s\n",
         ew, ec, ew * 1e9 / ranges, nvtx / ew
  printf "floor_wall %.3f s\nfloor_cpu %.3f s\nfloor_ns_per_row %.0f ns\n", fw, fc, fw * 1e9 / ranges
  printf "export_vs_floor %.2f x\n", ew / fw
  printf "db_bytes_per_event %.1f B\nfloor_bytes_per_row %.1f B\n", bytes / events, fbytes / ranges
}'
