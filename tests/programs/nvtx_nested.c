// Nested NVTX ranges of known durations, so self and total times are known exactly.
//
//   nvtx_nested [REPEAT=3] [INNER=4] [INNER_MS=10] [GAP_MS=5] [LEAF_MS=4]
//
// Each repeat is one "outer" range:
//   outer = GAP, then INNER times { inner, GAP }
//   inner = INNER_MS/2, leaf (LEAF_MS), INNER_MS/2
// so per call: outer self = (INNER+1)*GAP, outer total = self + INNER*(INNER_MS+LEAF_MS),
// inner self = INNER_MS, inner total = INNER_MS+LEAF_MS, leaf self = total = LEAF_MS.
// A "checkpoint" mark follows each outer range.
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

static void run_inner(double inner_ms, double leaf_ms) {
  nvtxRangePushA("inner");
  tp_busy_ms(inner_ms / 2);
  nvtxRangePushA("leaf");
  tp_busy_ms(leaf_ms);
  nvtxRangePop();
  tp_busy_ms(inner_ms / 2);
  nvtxRangePop();
}

int main(int argc, char** argv) {
  int repeat = (int)tp_arg(argc, argv, 1, 3);
  int inner = (int)tp_arg(argc, argv, 2, 4);
  double inner_ms = tp_arg(argc, argv, 3, 10);
  double gap_ms = tp_arg(argc, argv, 4, 5);
  double leaf_ms = tp_arg(argc, argv, 5, 4);

  for (int r = 0; r < repeat; ++r) {
    nvtxRangePushA("outer");
    tp_busy_ms(gap_ms);
    for (int i = 0; i < inner; ++i) {
      run_inner(inner_ms, leaf_ms);
      tp_busy_ms(gap_ms);
    }
    nvtxRangePop();
    nvtxMarkA("checkpoint");
  }
  printf("nvtx_nested: %d outer, %d inner, %d leaf\n", repeat, repeat * inner, repeat * inner);
  return 0;
}
