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
#include "truth.h"

static void timed(TpTimeline* t, const char* name, double ms) {
  int64_t start = tp_push(name);
  tp_wait_ms(t, ms);
  tp_pop(name, start);
}

int main(int argc, char** argv) {
  nvtxInitialize(NULL);  // loads the tool now, not inside the first timed range
  tp_truth_init();
  tp_ready();
  int steps = (int)tp_arg(argc, argv, 1, 6);
  double fwd = tp_arg(argc, argv, 2, 4);
  double bwd = tp_arg(argc, argv, 3, 6);
  double gap = tp_arg(argc, argv, 4, 1);
  TpTimeline t = tp_timeline_start();
  for (int k = 0; k < steps; ++k) {
    static char names[1024][24];  // truth.h keeps pointers to the names
    char* name = names[k % 1024];
    snprintf(name, sizeof names[0], "ProfilerStep#%d", k);
    int64_t step_start = tp_push(name);
    tp_wait_ms(&t, gap);
    timed(&t, "forward", fwd);
    tp_wait_ms(&t, gap);
    timed(&t, "backward", bwd);
    tp_wait_ms(&t, gap);
    tp_pop(name, step_start);
    timed(&t, "between_steps", gap);
  }
  printf("nvtx_steps: %d steps\n", steps);
  return 0;
}
