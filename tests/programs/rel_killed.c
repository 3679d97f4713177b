// Dies of SIGKILL, which no handler sees, at a chosen moment, for the tests of what a
// killed target leaves in the report.
//
//   rel_killed MODE [RANGES=1000] [WARM_MS=0]
//
// Emits one "warm" range, waits WARM_MS (so that it and the names are flushed first
// when WARM_MS is a few flush intervals), then RANGES "killed_range" ranges as fast as
// it can, then:
//   after  SIGKILL right after the last range ended
//   burst  pushes three nested "open_range" ranges and dies inside them, in the middle
//          of a burst of records
// Prints "emitted=RANGES open=K" (K open ranges at the kill) before the burst starts.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "after";
  long ranges = (long)tp_arg(argc, argv, 2, 1000);
  double warm_ms = tp_arg(argc, argv, 3, 0);
  int burst = strcmp(mode, "burst") == 0;
  printf("emitted=%ld open=%d\n", ranges, burst ? 3 : 0);
  fflush(stdout);
  nvtxRangePushA("warm");
  nvtxRangePop();
  if (warm_ms > 0) usleep((useconds_t)(warm_ms * 1000));
  for (long i = 0; i < ranges; ++i) {
    nvtxRangePushA("killed_range");
    nvtxRangePop();
  }
  if (burst) {
    nvtxRangePushA("open_range");
    nvtxRangePushA("open_range");
    nvtxRangePushA("open_range");
  }
  raise(SIGKILL);
  return 0;
}
