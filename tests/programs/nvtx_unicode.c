// Non-ASCII range and mark names through the A (UTF-8) and W (wchar_t) entry points.
//
//   nvtx_unicode [N=3]
//
// Each name below is pushed N times; A and W names are distinct so that each row's
// count is known whatever the tool does with wide strings (it should turn them into
// the same UTF-8). Also prints the names on stdout.
#include <stdio.h>
#include <wchar.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"
#include "truth.h"

static const char* const kUtf8Names[] = {"矩阵乘法", "données", "🚀 launch", "Grüße ∑ ok"};
static const wchar_t* const kWideNames[] = {L"宽字符范围", L"éàü wide", L"🔥 wide"};
static const char* const kWideUtf8[] = {"宽字符范围", "éàü wide", "🔥 wide"};

int main(int argc, char** argv) {
  nvtxInitialize(NULL);  // loads the tool now, not inside the first timed range
  tp_truth_init();
  tp_ready();
  int n = (int)tp_arg(argc, argv, 1, 3);
  TpTimeline t = tp_timeline_start();
  for (int i = 0; i < n; ++i) {
    for (size_t k = 0; k < sizeof kUtf8Names / sizeof kUtf8Names[0]; ++k) {
      int64_t start = tp_push(kUtf8Names[k]);
      tp_wait_ms(&t, 1);
      tp_pop(kUtf8Names[k], start);
    }
    for (size_t k = 0; k < sizeof kWideNames / sizeof kWideNames[0]; ++k) {
      int64_t start = tp_now_ns();
      nvtxRangePushW(kWideNames[k]);
      tp_wait_ms(&t, 1);
      nvtxRangePop();
      tp_truth('p', kWideUtf8[k], start, tp_now_ns());
    }
    nvtxMarkA("标记 ✓");
    nvtxMarkW(L"ワイド mark");
  }
  for (size_t k = 0; k < sizeof kUtf8Names / sizeof kUtf8Names[0]; ++k) printf("%s\n", kUtf8Names[k]);
  return 0;
}
