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

static const char* const kUtf8Names[] = {"矩阵乘法", "données", "🚀 launch", "Grüße ∑ ok"};
static const wchar_t* const kWideNames[] = {L"宽字符范围", L"éàü wide", L"🔥 wide"};

int main(int argc, char** argv) {
  int n = (int)tp_arg(argc, argv, 1, 3);
  for (int i = 0; i < n; ++i) {
    for (size_t k = 0; k < sizeof kUtf8Names / sizeof kUtf8Names[0]; ++k) {
      nvtxRangePushA(kUtf8Names[k]);
      tp_busy_ms(1);
      nvtxRangePop();
    }
    for (size_t k = 0; k < sizeof kWideNames / sizeof kWideNames[0]; ++k) {
      nvtxRangePushW(kWideNames[k]);
      tp_busy_ms(1);
      nvtxRangePop();
    }
    nvtxMarkA("标记 ✓");
    nvtxMarkW(L"ワイド mark");
  }
  for (size_t k = 0; k < sizeof kUtf8Names / sizeof kUtf8Names[0]; ++k) printf("%s\n", kUtf8Names[k]);
  return 0;
}
