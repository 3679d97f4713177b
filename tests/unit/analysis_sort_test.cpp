// sort_events() must give exactly what a stable sort by (tid, start, longer first)
// gives: it groups by thread and permutes in place instead of sorting a copy.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "analysis/analysis.h"

namespace torchprof {

namespace {

uint64_t next(uint64_t& x) {
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x >> 33;
}

// Events in arrival order: runs of a few threads' events, mostly in time order per
// thread, with ties and some out-of-order starts; payload holds the input position.
std::vector<Event> arrivals(uint64_t seed, size_t n) {
  std::vector<Event> events;
  uint64_t x = seed;
  std::vector<int64_t> clock(4, 1000);
  for (size_t i = 0; i < n; ++i) {
    Event& e = events.emplace_back();
    e.tid = static_cast<uint32_t>(10 + next(x) % 4);
    int64_t& t = clock[e.tid - 10];
    const uint64_t roll = next(x) % 10;
    t += roll < 2 ? 0 : static_cast<int64_t>(next(x) % 50);  // ties
    e.start_ns = roll == 9 ? t - static_cast<int64_t>(next(x) % 200) : t;  // out of order
    e.end_ns = e.start_ns + static_cast<int64_t>(next(x) % 4) * 10;  // equal ends too
    e.payload = i;
  }
  return events;
}

}  // namespace

TEST_CASE("sort_events: the order of a stable sort, every event kept") {
  for (uint64_t seed : {1u, 2u, 3u, 42u}) {
    for (size_t n : {0u, 1u, 2u, 17u, 1000u}) {
      std::vector<Event> mine = arrivals(seed, n);
      std::vector<Event> expected = mine;
      std::stable_sort(expected.begin(), expected.end(), [](const Event& a, const Event& b) {
        if (a.tid != b.tid) return a.tid < b.tid;
        if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
        return a.end_ns > b.end_ns;
      });
      sort_events(mine);
      REQUIRE(mine.size() == expected.size());
      for (size_t i = 0; i < n; ++i) {
        INFO("seed " << seed << " n " << n << " at " << i);
        CHECK(mine[i].payload == expected[i].payload);
      }
    }
  }
}

}  // namespace torchprof
