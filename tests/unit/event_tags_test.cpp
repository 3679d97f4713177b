#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

TEST_CASE("event tags: one shared copy per distinct set, none for the empty set") {
  CHECK(EventTags::intern(EventTags{}) == nullptr);
  EventTags a{.domain = "d1", .category_name = "io", .op = nullptr, .category = 3};
  const EventTags* first = EventTags::intern(a);
  REQUIRE(first != nullptr);
  CHECK(*first == a);
  CHECK(EventTags::intern(a) == first);
  EventTags b = a;
  b.category = 4;
  CHECK(EventTags::intern(b) != first);
  b = a;
  b.end_tid = 12;
  CHECK(EventTags::intern(b) != first);
  // More sets than the per-thread cache holds, asked for in turn by several threads:
  // each thread gets the one copy of each set.
  constexpr int kSets = 300;
  std::vector<EventTags> sets(kSets);
  for (int i = 0; i < kSets; ++i) sets[i] = EventTags{.domain = std::string(1, static_cast<char>('a' + i % 7)), .category = uint32_t(i)};
  std::vector<std::vector<const EventTags*>> got(4, std::vector<const EventTags*>(kSets));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < kSets; ++i) got[t][(i * 7 + t) % kSets] = EventTags::intern(sets[(i * 7 + t) % kSets]);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int i = 0; i < kSets; ++i) {
    CAPTURE(i);
    REQUIRE(got[0][i] != nullptr);
    CHECK(*got[0][i] == sets[i]);
    for (int t = 1; t < 4; ++t) CHECK(got[t][i] == got[0][i]);
  }
}

TEST_CASE("event tags: an event's setters keep the other tags, and the defaults need none") {
  Event e;
  e.tid = 5;
  CHECK(e.tags == nullptr);
  CHECK(e.domain().empty());
  CHECK(e.op() == nullptr);
  CHECK(e.category() == 0);
  CHECK(e.end_tid() == 5);
  e.set_end_tid(5);  // its own thread: nothing to keep
  CHECK(e.tags == nullptr);
  e.set_domain("dom");
  e.set_category(7, "io");
  OpInfo op{.name = "aten::mm"};
  e.set_op(&op);
  e.set_end_tid(9);
  CHECK(e.domain() == "dom");
  CHECK(e.category() == 7);
  CHECK(e.category_name() == "io");
  CHECK(e.op() == &op);
  CHECK(e.end_tid() == 9);
  e.set_end_tid(5);
  CHECK(e.end_tid() == 5);
  CHECK(e.domain() == "dom");
  e.set_domain(Name());
  e.set_category(0, Name());
  e.set_op(nullptr);
  CHECK(e.tags == nullptr);
  Event api;
  api.kind = EventKind::kCudaRuntime;
  api.set_cbid(211);
  CHECK(api.cbid() == 211);
  CHECK(api.domain().empty());
  // 64 bytes of NVTX and API fields, and the 8 of a RecordFunction op's sequence number,
  // scope and forward thread (op_word).
  CHECK(sizeof(Event) == 72);
}

}  // namespace torchprof
