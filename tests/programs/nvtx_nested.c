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
#include "truth.h"

static void run_inner(TpTimeline* t, double inner_ms, double leaf_ms) {
  int64_t inner = tp_push("inner");
  tp_wait_ms(t, inner_ms / 2);
  int64_t leaf = tp_push("leaf");
  tp_wait_ms(t, leaf_ms);
  tp_pop("leaf", leaf);
  tp_wait_ms(t, inner_ms / 2);
  tp_pop("inner", inner);
}

int main(int argc, char** argv) {
  nvtxInitialize(NULL);  // loads the tool now, not inside the first timed range
  tp_truth_init();
  tp_ready();
  int repeat = (int)tp_arg(argc, argv, 1, 3);
  int inner = (int)tp_arg(argc, argv, 2, 4);
  double inner_ms = tp_arg(argc, argv, 3, 10);
  double gap_ms = tp_arg(argc, argv, 4, 5);
  double leaf_ms = tp_arg(argc, argv, 5, 4);

  TpTimeline t = tp_timeline_start();
  for (int r = 0; r < repeat; ++r) {
    int64_t outer = tp_push("outer");
    tp_wait_ms(&t, gap_ms);
    for (int i = 0; i < inner; ++i) {
      run_inner(&t, inner_ms, leaf_ms);
      tp_wait_ms(&t, gap_ms);
    }
    tp_pop("outer", outer);
    nvtxMarkA("checkpoint");
  }
  printf("nvtx_nested: %d outer, %d inner, %d leaf\n", repeat, repeat * inner, repeat * inner);
  return 0;
}
