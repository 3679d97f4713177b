#!/usr/bin/env bash
# fuzz.capture_smoke: fuzz for a bounded time with libFuzzer when it was built, else
# replay the seed corpus through the same entry point built by the normal compiler.
#   smoke.sh LIBFUZZER_BINARY|"" REPLAY_BINARY CORPUS_DIR WORK_DIR SECONDS
set -euo pipefail
fuzzer=$1 replay=$2 corpus=$3 work=$4 seconds=$5

"$replay" "$corpus"
if [[ -z $fuzzer || ! -x $fuzzer ]]; then
  echo "fuzz.capture_smoke: no libFuzzer binary (clang++ not found); replayed the corpus only"
  exit 0
fi
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
# New inputs go to the scratch corpus; the seeds stay untouched.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" "$corpus"
