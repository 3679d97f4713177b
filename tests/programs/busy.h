// Exact, known durations for the programs the integration tests profile. Spinning on
// CLOCK_MONOTONIC (not sleeping) keeps a range's wall time equal to what was asked even
// on a loaded machine, which is what the 10% tolerances in tests/integration rely on.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline int64_t tp_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void tp_spin_until(int64_t deadline_ns) {
  while (tp_now_ns() < deadline_ns) {
  }
}

static inline void tp_busy_us(double us) { tp_spin_until(tp_now_ns() + (int64_t)(us * 1000.0)); }

static inline void tp_busy_ms(double ms) { tp_busy_us(ms * 1000.0); }

// A thread's schedule of deadlines: each wait ends at a fixed offset from the start, not
// a fixed time after the previous wait. If the thread is preempted past a deadline, the
// next wait is shorter by as much, so one preemption shifts a single boundary instead of
// every range after it (2-core machines shared with compilers preempt often).
typedef struct {
  int64_t next_ns;
} TpTimeline;

static inline TpTimeline tp_timeline_start(void) {
  TpTimeline t = {tp_now_ns()};
  return t;
}

static inline void tp_wait_ms(TpTimeline* t, double ms) {
  t->next_ns += (int64_t)(ms * 1e6);
  tp_spin_until(t->next_ns);
}

// argv[i] as a number, or `fallback` when absent; exits 2 on garbage so a typo in a test
// does not silently run with a default.
static inline double tp_arg(int argc, char** argv, int i, double fallback) {
  if (i >= argc) return fallback;
  char* end = NULL;
  double v = strtod(argv[i], &end);
  if (end == argv[i] || *end != '\0') exit(2);
  return v;
}

// A "VmRSS:"-style field of /proc/self/status in kB (`field` with its colon), or -1.
static inline long tp_status_kb(const char* field) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kb = -1;
  size_t n = strlen(field);
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, field, n) == 0) kb = strtol(line + n, NULL, 10);
  }
  fclose(f);
  return kb;
}
