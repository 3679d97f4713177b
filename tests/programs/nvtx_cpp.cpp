// The NVTX C++ API (nvtx3.hpp): domains, registered strings, named categories,
// payloads, marks, start/end ranges and a wide-string range.
//
//   nvtx_cpp [ITERATIONS=5] [MS=2]
//
// Per iteration, each range lasting MS of its own time:
//   "domain_range"      in domain "torchprof.test", containing
//   "registered_range"  a registered string in that domain, category "io" (id 7), payload i (int64)
//   "registered_global" a registered string in the default domain
//   "global_range"      default domain, category 3, payload 3.5 (double)
//   "wide_range"        nvtxRangePushW
//   "unique_range"      start/end range in "torchprof.test"
//   marks "domain_mark" (payload i as uint64) and "global_mark"
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <nvtx3/nvtx3.hpp>

#include "busy.h"
#include "truth.h"

namespace {

struct TestDomain {
  static constexpr char const* name{"torchprof.test"};
};
struct RegisteredMsg {
  static constexpr char const* message{"registered_range"};
};
struct RegisteredGlobalMsg {
  static constexpr char const* message{"registered_global"};
};
struct IoCategory {
  static constexpr char const* name{"io"};
  static constexpr uint32_t id{7};
};

// Times a C++-API range from just before it opens to just after it closes.
template <typename Body>
void timed(char kind, const char* name, Body body) {
  const int64_t start = tp_now_ns();
  body();
  tp_truth(kind, name, start, tp_now_ns());
}

void one_iteration(int64_t i, double ms) {
  TpTimeline t = tp_timeline_start();
  timed('p', "domain_range", [&] {
    nvtx3::scoped_range_in<TestDomain> outer{"domain_range"};
    tp_wait_ms(&t, ms);
    timed('p', "registered_range", [&] {
      nvtx3::scoped_range_in<TestDomain> inner{
          nvtx3::registered_string_in<TestDomain>::get<RegisteredMsg>(),
          nvtx3::named_category_in<TestDomain>::get<IoCategory>(), nvtx3::payload{i}};
      tp_wait_ms(&t, ms);
    });
  });
  timed('p', "registered_global", [&] {
    nvtx3::scoped_range reg{nvtx3::registered_string_in<>::get<RegisteredGlobalMsg>()};
    tp_wait_ms(&t, ms);
  });
  timed('p', "global_range", [&] {
    nvtx3::scoped_range global{"global_range", nvtx3::category{3}, nvtx3::payload{3.5},
                               nvtx3::rgb{127, 255, 0}};
    tp_wait_ms(&t, ms);
  });
  timed('p', "wide_range", [&] {
    nvtxRangePushW(L"wide_range");
    tp_wait_ms(&t, ms);
    nvtxRangePop();
  });
  timed('s', "unique_range", [&] {
    nvtx3::unique_range_in<TestDomain> unique{"unique_range"};
    tp_wait_ms(&t, ms);
  });
  nvtx3::mark_in<TestDomain>("domain_mark", nvtx3::payload{static_cast<uint64_t>(i)});
  nvtx3::mark("global_mark");
}

}  // namespace

int main(int argc, char** argv) {
  nvtxInitialize(nullptr);  // loads the tool now, not inside the first timed range
  tp_truth_init();
  tp_ready();
  const int iterations = static_cast<int>(tp_arg(argc, argv, 1, 5));
  const double ms = tp_arg(argc, argv, 2, 2);
  for (int i = 0; i < iterations; ++i) one_iteration(i, ms);
  std::printf("nvtx_cpp: %d iterations\n", iterations);
  return 0;
}
