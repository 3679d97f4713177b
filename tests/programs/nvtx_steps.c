// Training-like steps for the step and schedule tests.
//
//   nvtx_steps [S=6] [FWD_MS=4] [BWD_MS=6] [GAP_MS=1]
//
// S ranges "ProfilerStep#k" (k = 0..S-1), each: GAP, "forward" (FWD_MS), GAP,
// "backward" (BWD_MS), GAP. So a step lasts FWD_MS+BWD_MS+3*GAP_MS and its own
// (self) time is 3*GAP_MS. A "between_steps" range of GAP_MS sits outside every step
// after each step.
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

static void timed(const char* name, double ms) {
  nvtxRangePushA(name);
  tp_busy_ms(ms);
  nvtxRangePop();
}

int main(int argc, char** argv) {
  int steps = (int)tp_arg(argc, argv, 1, 6);
  double fwd = tp_arg(argc, argv, 2, 4);
  double bwd = tp_arg(argc, argv, 3, 6);
  double gap = tp_arg(argc, argv, 4, 1);
  for (int k = 0; k < steps; ++k) {
    char name[64];
    snprintf(name, sizeof name, "ProfilerStep#%d", k);
    nvtxRangePushA(name);
    tp_busy_ms(gap);
    timed("forward", fwd);
    tp_busy_ms(gap);
    timed("backward", bwd);
    tp_busy_ms(gap);
    nvtxRangePop();
    timed("between_steps", gap);
  }
  printf("nvtx_steps: %d steps\n", steps);
  return 0;
}
