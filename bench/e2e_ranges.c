// End to end: RANGES NVTX push/pop ranges with WORK iterations of fixed arithmetic
// between two, about 1M ranges/s for 2 s on a 2-core machine with the defaults.
// The loop is timed by the program; scripts/bench.sh times the whole process too
// (tool start, collection and analysis included).
//
//   e2e_ranges [RANGES=2000000] [WORK=800]
//
// Prints `loop_s` (wall), `loop_cpu_s` (CPU time of the whole process during the
// loop: an injection's background threads count), `ranges_per_s` (by wall) and
// `checksum` (keeps the work from being optimised away).
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>

#include "bench_util.h"

static const char* const kNames[] = {"step", "forward", "backward", "optimizer", "load", "loss", "log", "sync"};

int main(int argc, char** argv) {
  long ranges = (long)bench_arg(argc, argv, 1, 2000000);
  uint64_t work = (uint64_t)bench_arg(argc, argv, 2, 800);
  if (ranges < 1) return 2;
  uint64_t acc = 0;
  nvtxRangePushA("warmup");
  nvtxRangePop();
  int64_t t0 = bench_now_ns();
  int64_t cpu0 = bench_process_cpu_ns();
  for (long i = 0; i < ranges; ++i) {
    nvtxRangePushA(kNames[i & 7]);
    acc += bench_work(work, (uint64_t)i);
    nvtxRangePop();
  }
  double s = (double)(bench_now_ns() - t0) / 1e9;
  double cpu = (double)(bench_process_cpu_ns() - cpu0) / 1e9;
  bench_figure("loop_s", s, "s");
  bench_figure("loop_cpu_s", cpu, "s");
  bench_figure("ranges_per_s", (double)ranges / s, "ranges/s");
  bench_figure("checksum", (double)(acc & 0xFFFF), "-");
  return 0;
}
