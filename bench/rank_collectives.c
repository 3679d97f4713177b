// One rank of a synthetic data-parallel job, for timing merged reports of many ranks
// (scripts/bench-merge.sh): STEPS ProfilerStep#N ranges, each holding RANGES short NVTX
// ranges of work and then an "nccl:all_reduce" range that ends, on every rank, at the
// same moment of the wall clock (START_NS + (k + 1) * PERIOD_MS), as a collective ends
// once the last rank has arrived. The rank named by LATE_RANK works LATE_MS longer
// before it, so the others wait for it while every rank's steps last PERIOD_MS.
//
//   rank_collectives STEPS RANGES PERIOD_MS WORK_US LATE_MS START_NS
//
// RANK and LATE_RANK come from the environment. The work between ranges sleeps (at least
// WORK_US), so that many ranks on a few CPUs keep the steps' pace.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <nvtx3/nvToolsExt.h>


static long long realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(long long when_ns) {
  for (;;) {
    const long long left = when_ns - realtime_ns();
    if (left <= 0) return;
    struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    nanosleep(&ts, NULL);
  }
}

// "Work" sleeps: 64 ranks on a machine of 2 CPUs must still keep the steps' pace.
static void spin_us(long us) { sleep_until(realtime_ns() + us * 1000LL); }

int main(int argc, char** argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: rank_collectives STEPS RANGES PERIOD_MS WORK_US LATE_MS START_NS\n");
    return 2;
  }
  const long steps = atol(argv[1]);
  const long ranges = atol(argv[2]);
  const long long period_ns = atoll(argv[3]) * 1000000LL;
  const long work_us = atol(argv[4]);
  const long late_ms = atol(argv[5]);
  const long long start_ns = atoll(argv[6]);
  const char* rank_env = getenv("RANK");
  const char* late_env = getenv("LATE_RANK");
  const int late = rank_env != NULL && late_env != NULL && atoi(rank_env) == atoi(late_env);
  char name[40];
  sleep_until(start_ns);
  for (long s = 0; s < steps; ++s) {
    snprintf(name, sizeof name, "ProfilerStep#%ld", s);
    nvtxRangePushA(name);
    for (long i = 0; i < ranges; ++i) {
      nvtxRangePushA((i & 1) != 0 ? "forward" : "backward");
      spin_us(work_us);
      nvtxRangePop();
    }
    if (late) spin_us(late_ms * 1000L);
    nvtxRangePushA("nccl:all_reduce");
    sleep_until(start_ns + (s + 1) * period_ns);
    nvtxRangePop();
    nvtxRangePop();
  }
  printf("events %ld\n", steps * (ranges + 2));
  return 0;
}
