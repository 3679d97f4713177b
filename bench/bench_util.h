// Shared by the benchmark programs: a monotonic clock, numeric arguments, and the
// one output line format `name value unit` that scripts/bench.sh collects.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline int64_t bench_clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t bench_now_ns(void) { return bench_clock_ns(CLOCK_MONOTONIC); }

// CPU time, not wall time, is what the per-event figures use: on a shared 2-core
// machine with a load of 8 the wall clock runs several times faster than a thread's
// share of the CPU, and the ratio changes from one second to the next.
static inline int64_t bench_thread_cpu_ns(void) { return bench_clock_ns(CLOCK_THREAD_CPUTIME_ID); }
static inline int64_t bench_process_cpu_ns(void) { return bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

// argv[i] as a number, or `fallback` when absent; exits 2 on garbage.
static inline double bench_arg(int argc, char** argv, int i, double fallback) {
  if (i >= argc) return fallback;
  char* end = NULL;
  double v = strtod(argv[i], &end);
  if (end == argv[i] || *end != '\0') {
    fprintf(stderr, "bad number: %s\n", argv[i]);
    exit(2);
  }
  return v;
}

static inline void bench_figure(const char* name, double value, const char* unit) {
  printf("%s %.6g %s\n", name, value, unit);
}

// Fixed arithmetic work (not a clock spin: a spin on the clock would absorb the
// overhead being measured). Returns a value the caller must use.
static inline uint64_t bench_work(uint64_t iterations, uint64_t seed) {
  uint64_t x = seed | 1;
  for (uint64_t i = 0; i < iterations; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}
