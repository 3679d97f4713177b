// A training loop's shape for the analysis side: STEPS ProfilerStep#N ranges, each
// holding RANGES short NVTX ranges. Under a schedule such as wait=1,warmup=1,active=1
// its capture has a saved trace every few steps: thousands of cycles, which is what
// scripts/bench.sh times `torchprof report` on (writing N cycles must cost about the
// same as writing one, not N times a scan of the whole run).
//
//   step_ranges [STEPS=20000] [RANGES=50] [after]
//
// `after`: each step is written once it ended, through torchprof_step_range() as the
// Python bootstrap writes its automatic steps (a start/end range in the "torchprof"
// domain); run without torchprof, the steps are pushed and popped as without it.
// Each step then begins and ends with about 2 us outside any range, as between an
// optimizer's step and the next op: the step's times are read on CLOCK_MONOTONIC and
// placed on the records' clock within some tens of nanoseconds, so a range closer than
// that to a step's edge may cross it (the streamed table then analyses the capture
// whole).
//
// Prints `events` (ranges, step ranges included) and `loop_s`.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "bench_util.h"

int main(int argc, char** argv) {
  long steps = (long)bench_arg(argc, argv, 1, 20000);
  long ranges = (long)bench_arg(argc, argv, 2, 50);
  if (steps < 1 || ranges < 0) return 2;
  typedef void (*StepRangeFn)(const char*, uint64_t, uint64_t);
  StepRangeFn after = NULL;
  if (argc > 3 && strcmp(argv[3], "after") == 0) after = (StepRangeFn)dlsym(RTLD_DEFAULT, "torchprof_step_range");
  char name[40];
  uint64_t acc = 0;
  int64_t t0 = bench_now_ns();
  for (long s = 0; s < steps; ++s) {
    snprintf(name, sizeof name, "ProfilerStep#%ld", s);
    const int64_t step_start = bench_now_ns();
    if (after == NULL) {
      nvtxRangePushA(name);
    } else {
      acc += bench_work(1000, (uint64_t)s);
    }
    for (long i = 0; i < ranges; ++i) {
      nvtxRangePushA((i & 1) != 0 ? "forward" : "backward");
      acc += bench_work(50, (uint64_t)i);
      nvtxRangePop();
    }
    if (after != NULL) {
      acc += bench_work(1000, (uint64_t)s);
      after(name, (uint64_t)step_start, (uint64_t)bench_now_ns());
    } else {
      nvtxRangePop();
    }
  }
  bench_figure("events", (double)(steps * (ranges + 1)), "events");
  bench_figure("loop_s", (double)(bench_now_ns() - t0) / 1e9, "s");
  bench_figure("checksum", (double)(acc & 0xFFFF), "-");
  return 0;
}
