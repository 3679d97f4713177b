// NVTX push/pop ranges at a set rate: RANGES in all, RATE ranges/s in all, shared by
// THREADS threads (each makes RANGES/THREADS at RATE/THREADS per second). Each thread
// keeps to its schedule by waiting on the clock between two ranges and, when it falls
// behind (preempted), catching up at once, as a program with that much to do would.
// For the figures on what is dropped at a given rate (scripts/bench.sh), not for cost.
//
//   rate_ranges [RANGES=2000000] [RATE=2500000] [THREADS=1]
//
// Prints `ranges_per_s` (what the threads achieved together, by wall time), `wall_s`
// (the slowest thread's loop), `behind_ms` (the most a thread fell behind its
// schedule) and `ranges` (the ranges made, one warm-up range per thread not counted).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>

#include "bench_util.h"

static const char* const kNames[] = {"step", "forward", "backward", "optimizer", "load", "loss", "log", "sync"};

typedef struct {
  long ranges;
  double period_ns;
  pthread_barrier_t* start;
  int64_t wall_ns;
  int64_t behind_ns;
} Worker;

static void* run_worker(void* arg) {
  Worker* w = (Worker*)arg;
  nvtxRangePushA("warmup");  // the thread's buffers are made outside the timed loop
  nvtxRangePop();
  pthread_barrier_wait(w->start);
  const int64_t t0 = bench_now_ns();
  int64_t behind = 0;
  for (long i = 0; i < w->ranges; ++i) {
    const int64_t due = t0 + (int64_t)((double)i * w->period_ns);
    int64_t now = bench_now_ns();
    while (now < due) now = bench_now_ns();
    if (now - due > behind) behind = now - due;
    nvtxRangePushA(kNames[i & 7]);
    nvtxRangePop();
  }
  w->wall_ns = bench_now_ns() - t0;
  w->behind_ns = behind;
  return NULL;
}

int main(int argc, char** argv) {
  const long ranges = (long)bench_arg(argc, argv, 1, 2000000);
  const double rate = bench_arg(argc, argv, 2, 2500000);
  const int threads = (int)bench_arg(argc, argv, 3, 1);
  if (ranges < 1 || rate <= 0 || threads < 1 || threads > 64) {
    fprintf(stderr, "usage: rate_ranges [RANGES>0] [RATE>0] [THREADS 1..64]\n");
    return 2;
  }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  Worker workers[64];
  pthread_t ids[64];
  for (int t = 0; t < threads; ++t) {
    workers[t] = (Worker){ranges / threads, 1e9 * threads / rate, &start, 0, 0};
    pthread_create(&ids[t], NULL, run_worker, &workers[t]);
  }
  int64_t wall = 0, behind = 0;
  long made = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    if (workers[t].wall_ns > wall) wall = workers[t].wall_ns;
    if (workers[t].behind_ns > behind) behind = workers[t].behind_ns;
    made += workers[t].ranges;
  }
  bench_figure("ranges_per_s", (double)made * 1e9 / (double)wall, "ranges/s");
  bench_figure("wall_s", (double)wall / 1e9, "s");
  bench_figure("behind_ms", (double)behind / 1e6, "ms");
  bench_figure("ranges", (double)made, "ranges");
  return 0;
}
