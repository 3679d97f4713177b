// A training loop's shape for the analysis side: STEPS ProfilerStep#N ranges, each
// holding RANGES short NVTX ranges. Under a schedule such as wait=1,warmup=1,active=1
// its capture has a saved trace every few steps: thousands of cycles, which is what
// scripts/bench.sh times `torchprof report` on (writing N cycles must cost about the
// same as writing one, not N times a scan of the whole run).
//
//   step_ranges [STEPS=20000] [RANGES=50]
//
// Prints `events` (ranges, step ranges included) and `loop_s`.
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>

#include "bench_util.h"

int main(int argc, char** argv) {
  long steps = (long)bench_arg(argc, argv, 1, 20000);
  long ranges = (long)bench_arg(argc, argv, 2, 50);
  if (steps < 1 || ranges < 0) return 2;
  char name[40];
  uint64_t acc = 0;
  int64_t t0 = bench_now_ns();
  for (long s = 0; s < steps; ++s) {
    snprintf(name, sizeof name, "ProfilerStep#%ld", s);
    nvtxRangePushA(name);
    for (long i = 0; i < ranges; ++i) {
      nvtxRangePushA((i & 1) != 0 ? "forward" : "backward");
      acc += bench_work(50, (uint64_t)i);
      nvtxRangePop();
    }
    nvtxRangePop();
  }
  bench_figure("events", (double)(steps * (ranges + 1)), "events");
  bench_figure("loop_s", (double)(bench_now_ns() - t0) / 1e9, "s");
  bench_figure("checksum", (double)(acc & 0xFFFF), "-");
  return 0;
}
