// Two versions of one training loop, for `torchprof diff` and scripts/before_after.sh.
//
//   diff_demo [STEPS=10] [VARIANT=0]
//
// STEPS "ProfilerStep#k" ranges, each holding, in order: "data_load" (1 ms),
// "forward" (4 ms), "backward" (6 ms), "norm_legacy" (1 ms) and "optimizer.step" (2 ms).
// VARIANT 1 makes "forward" 1.5x slower (6 ms); VARIANT 2 replaces "norm_legacy" by
// "norm_fused" (0.5 ms): one op vanishes, a new one appears.
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

static void timed(const char* name, double ms) {
  nvtxRangePushA(name);
  tp_busy_ms(ms);
  nvtxRangePop();
}

int main(int argc, char** argv) {
  int steps = (int)tp_arg(argc, argv, 1, 10);
  int variant = (int)tp_arg(argc, argv, 2, 0);
  if (steps < 0 || variant < 0 || variant > 2) {
    fprintf(stderr, "usage: diff_demo [STEPS] [VARIANT 0|1|2]\n");
    return 2;
  }
  for (int k = 0; k < steps; ++k) {
    char name[64];
    snprintf(name, sizeof name, "ProfilerStep#%d", k);
    nvtxRangePushA(name);
    timed("data_load", 1);
    timed("forward", variant == 1 ? 6 : 4);
    timed("backward", 6);
    if (variant == 2) {
      timed("norm_fused", 0.5);
    } else {
      timed("norm_legacy", 1);
    }
    timed("optimizer.step", 2);
    nvtxRangePop();
  }
  printf("diff_demo: %d steps, variant %d\n", steps, variant);
  return 0;
}
