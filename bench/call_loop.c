// A tiny call loop for tracers that instrument function entry and exit (uftrace on
// a -pg build): CALLS calls of a small non-inlined function, timed by the program
// (process CPU time: a tracer's own threads count).
//
//   call_loop [CALLS=1000000]
//
// Prints `call_ns <ns per call> ns/call`.
#include <stdio.h>

#include "bench_util.h"

__attribute__((noinline)) uint64_t leaf(uint64_t x) { return bench_work(8, x); }

int main(int argc, char** argv) {
  long calls = (long)bench_arg(argc, argv, 1, 1000000);
  if (calls < 1) return 2;
  uint64_t acc = 0;
  int64_t t0 = bench_process_cpu_ns();
  for (long i = 0; i < calls; ++i) acc += leaf((uint64_t)i);
  bench_figure("call_ns", (double)(bench_process_cpu_ns() - t0) / (double)calls, "ns/call");
  bench_figure("checksum", (double)(acc & 0xFFFF), "-");
  return 0;
}
