// NVTX push+pop pairs in a tight loop, on THREADS threads at once, timed by the
// program itself: whatever injection is attached (none, the floor, torchprof)
// is what the figure measures.
//
//   nvtx_pairs [PAIRS_PER_THREAD=1000000] [THREADS=1] [NAMES=8]
//
// Prints, per pair and thread: `pair_ns` (the thread's own CPU time, mean over
// threads), `pair_ns_max` (slowest thread), `pair_wall_ns` (wall time, noisy on a
// loaded machine); `process_cpu_ns_per_pair` (CPU time of every thread of the
// process, an injection's background threads included, over all pairs); `pairs`. Names rotate over NAMES fixed strings,
// the repetitive traffic of a training loop.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>

#include "bench_util.h"

static const char* const kNames[] = {"forward", "backward", "optimizer.step", "aten::linear",
                                     "aten::relu", "aten::matmul", "data_loader", "all_reduce",
                                     "aten::add", "aten::mul", "aten::softmax", "aten::layer_norm",
                                     "aten::dropout", "aten::embedding", "aten::cat", "aten::view"};
enum { kNameCount = sizeof(kNames) / sizeof(kNames[0]) };

typedef struct {
  long pairs;
  unsigned names;
  pthread_barrier_t* start;
  double ns_per_pair;
  double wall_ns_per_pair;
} Worker;

static void* run_worker(void* arg) {
  Worker* w = (Worker*)arg;
  // The first event of a thread allocates its buffers: outside the timed loop.
  nvtxRangePushA("warmup");
  nvtxRangePop();
  pthread_barrier_wait(w->start);
  unsigned mask = w->names - 1;
  int64_t wall0 = bench_now_ns();
  int64_t cpu0 = bench_thread_cpu_ns();
  for (long i = 0; i < w->pairs; ++i) {
    nvtxRangePushA(kNames[i & mask]);
    nvtxRangePop();
  }
  w->ns_per_pair = (double)(bench_thread_cpu_ns() - cpu0) / (double)w->pairs;
  w->wall_ns_per_pair = (double)(bench_now_ns() - wall0) / (double)w->pairs;
  return NULL;
}

int main(int argc, char** argv) {
  long pairs = (long)bench_arg(argc, argv, 1, 1000000);
  int threads = (int)bench_arg(argc, argv, 2, 1);
  unsigned names = (unsigned)bench_arg(argc, argv, 3, 8);
  if (pairs < 1 || threads < 1 || threads > 64 || names < 1 || names > kNameCount || (names & (names - 1)) != 0) {
    fprintf(stderr, "usage: nvtx_pairs [PAIRS>0] [THREADS 1..64] [NAMES power of two <= %d]\n", kNameCount);
    return 2;
  }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  Worker workers[64];
  int64_t process_cpu0 = bench_process_cpu_ns();
  pthread_t ids[64];
  for (int t = 0; t < threads; ++t) {
    workers[t] = (Worker){pairs, names, &start, 0, 0};
    pthread_create(&ids[t], NULL, run_worker, &workers[t]);
  }
  double sum = 0, max = 0, wall = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    sum += workers[t].ns_per_pair;
    wall += workers[t].wall_ns_per_pair;
    if (workers[t].ns_per_pair > max) max = workers[t].ns_per_pair;
  }
  double process_cpu = (double)(bench_process_cpu_ns() - process_cpu0);
  bench_figure("pair_ns", sum / threads, "ns/pair");
  bench_figure("pair_ns_max", max, "ns/pair");
  bench_figure("pair_wall_ns", wall / threads, "ns/pair");
  bench_figure("process_cpu_ns_per_pair", process_cpu / ((double)pairs * threads), "ns/pair");
  bench_figure("pairs", (double)pairs * threads, "pairs");
  return 0;
}
