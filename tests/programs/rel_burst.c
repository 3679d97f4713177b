// A burst of NVTX marks, then a wait for the tool's buffers to be given back, for the
// tests of buffer growth and release.
//
//   rel_burst MARKS [PAUSE_MS=500] [SETTLE_MS=10000] [SETTLE_KB=8192]
//
// Emits one "ready" mark, prints "ready pid=N" and waits PAUSE_MS (the test may stop the
// collector meanwhile, so that the burst has to be held), then emits MARKS "burst" marks
// as fast as it can. Then it waits, reading its resident memory every 10 ms, until it is
// back within SETTLE_KB of what it was before the burst or SETTLE_MS have passed. Prints
//   emitted=<marks including ready> rss_before_kb=<before the burst>
//   rss_burst_kb=<just after it> rss_after_kb=<at the end of the wait> settle_ms=<wait>
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

int main(int argc, char** argv) {
  long marks = (long)tp_arg(argc, argv, 1, 1000000);
  double pause_ms = tp_arg(argc, argv, 2, 500);
  double settle_ms = tp_arg(argc, argv, 3, 10000);
  long settle_kb = (long)tp_arg(argc, argv, 4, 8192);
  nvtxMarkA("ready");
  printf("ready pid=%d\n", (int)getpid());
  fflush(stdout);
  usleep((useconds_t)(pause_ms * 1000));
  long before = tp_status_kb("VmRSS:");
  for (long i = 0; i < marks; ++i) nvtxMarkA("burst");
  long burst = tp_status_kb("VmRSS:");
  int64_t start = tp_now_ns();
  long after = burst;
  while ((double)(tp_now_ns() - start) < settle_ms * 1e6) {
    after = tp_status_kb("VmRSS:");
    if (after <= before + settle_kb) break;
    usleep(10000);
  }
  printf("emitted=%ld rss_before_kb=%ld rss_burst_kb=%ld rss_after_kb=%ld settle_ms=%.0f\n", marks + 1, before, burst,
         after, (double)(tp_now_ns() - start) / 1e6);
  fflush(stdout);
  return 0;
}
