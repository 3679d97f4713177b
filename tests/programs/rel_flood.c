// Floods the tool with NVTX marks and reports what it did, for the tests that stall
// or kill the collector while a program runs.
//
//   rel_flood ITERATIONS [SPIN_US=2] [PAUSE_MS=300]
//
// Emits one "ready" mark, waits PAUSE_MS (so the tool connects and sends it), prints
// "flooding pid=N" and then emits ITERATIONS "flood" marks, spinning SPIN_US between
// two. At the end it prints, on one line:
//   emitted=<marks including ready> wall_ns=<flood loop> max_gap_ns=<longest mark
//   call> hwm_kb=<VmHWM>
// and, when $TP_DONE_FILE is set, writes the same line there (the launcher may be gone).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

int main(int argc, char** argv) {
  long iterations = (long)tp_arg(argc, argv, 1, 1000000);
  double spin_us = tp_arg(argc, argv, 2, 2);
  double pause_ms = tp_arg(argc, argv, 3, 300);
  nvtxMarkA("ready");
  usleep((useconds_t)(pause_ms * 1000));
  printf("flooding pid=%d\n", (int)getpid());
  fflush(stdout);
  int64_t start = tp_now_ns();
  int64_t max_gap = 0;
  for (long i = 0; i < iterations; ++i) {
    int64_t before = tp_now_ns();
    nvtxMarkA("flood");
    int64_t gap = tp_now_ns() - before;
    if (gap > max_gap) max_gap = gap;
    tp_busy_us(spin_us);
  }
  int64_t wall = tp_now_ns() - start;
  char line[256];
  snprintf(line, sizeof line, "emitted=%ld wall_ns=%lld max_gap_ns=%lld hwm_kb=%ld\n", iterations + 1,
           (long long)wall, (long long)max_gap, tp_status_kb("VmHWM:"));
  fputs(line, stdout);
  fflush(stdout);
  const char* done = getenv("TP_DONE_FILE");
  if (done != NULL) {
    FILE* f = fopen(done, "w");
    if (f != NULL) {
      fputs(line, f);
      fclose(f);
    }
  }
  return 0;
}
