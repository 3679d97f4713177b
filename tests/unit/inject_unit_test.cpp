// Unit tests of the injected library's pure parts: UTF-8 conversion, the
// per-thread intern table, the recorder's all-or-nothing writes with exact drop
// counting, and the TSC clock's calibration (segments and their growth:
// inject_segments_test.cpp).
#include <doctest/doctest.h>
#include <semaphore.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "inject/clock.h"
#include "inject/recorder.h"
#include "inject/buffer_budget.h"
#include "inject/string_intern.h"
#include "inject/thread_buffer.h"
#include "inject/tsc_clock.h"
#include "inject/utf8.h"
#include "inject_drain.h"

namespace ti = torchprof::inject;
namespace tw = torchprof::wire;

namespace {

using ti::test::drain_records;

// (kind, name) of each record drain_records() takes.
std::vector<std::pair<tw::Kind, uint32_t>> drain(ti::ThreadBuffer* tb, std::vector<std::string>* strings = nullptr) {
  std::vector<std::pair<tw::Kind, uint32_t>> out;
  for (const tw::Record& r : drain_records(tb, strings)) out.emplace_back(static_cast<tw::Kind>(r.kind), r.name);
  return out;
}

// Holds the process's buffer cap at `bytes` for a test's length.
class CapGuard {
 public:
  explicit CapGuard(uint64_t bytes) : saved_(ti::buffer_budget().cap()) { ti::buffer_budget().set_cap(bytes); }
  ~CapGuard() { ti::buffer_budget().set_cap(saved_); }
  CapGuard(const CapGuard&) = delete;
  CapGuard& operator=(const CapGuard&) = delete;

 private:
  uint64_t saved_;
};

}  // namespace

TEST_CASE("wide_to_utf8 encodes every plane and never splits a character") {
  char out[16];
  size_t n = ti::wide_to_utf8(L"a\u00e9\u4e2d\U0001F600", out, sizeof(out));
  CHECK(std::string(out, n) == "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
  n = ti::wide_to_utf8(L"\u4e2d\u4e2d", out, 5);  // room for one 3-byte char only
  CHECK(n == 3);
  const wchar_t bad[] = {static_cast<wchar_t>(0xD800), 0};
  n = ti::wide_to_utf8(bad, out, sizeof(out));
  CHECK(std::string(out, n) == "\xEF\xBF\xBD");
}

TEST_CASE("intern table matches by content, not by pointer") {
  ti::StringIntern t;
  REQUIRE(t.init());
  ti::StringIntern::Probe p;
  char a[] = "aten::mm";
  CHECK(t.find(a, 8, &p) == ti::StringIntern::kNotFound);
  t.insert(p, a, 8, 42);
  std::string copy = "aten::mm";
  CHECK(t.find(copy.data(), 8, &p) == 42);
  CHECK(t.find(a, 7, &p) == ti::StringIntern::kNotFound);  // "aten::m" is another name
  strcpy(a, "aten::ab");                                   // same pointer, new text
  CHECK(t.find(a, 8, &p) == ti::StringIntern::kNotFound);
  t.release();
}

TEST_CASE("intern table stays correct when full") {
  ti::StringIntern t;
  REQUIRE(t.init());
  std::vector<std::string> names;
  for (int i = 0; i < 20000; ++i) names.push_back("name_" + std::to_string(i));
  for (size_t i = 0; i < names.size(); ++i) {
    ti::StringIntern::Probe p;
    if (t.find(names[i].data(), static_cast<uint32_t>(names[i].size()), &p) == 0) {
      t.insert(p, names[i].data(), static_cast<uint32_t>(names[i].size()), static_cast<uint32_t>(i + 1));
    }
  }
  int hits = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    ti::StringIntern::Probe p;
    uint32_t id = t.find(names[i].data(), static_cast<uint32_t>(names[i].size()), &p);
    if (id != 0) {
      CHECK(id == i + 1);  // a hit is always the right one
      ++hits;
    }
  }
  CHECK(hits > 1000);
  CHECK(hits < 20000);  // the table is bounded
  t.release();
}

// The VmFlags of the mapping holding `p`, from /proc/self/smaps ("" when not found).
static std::string vm_flags_at(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(' ') > line.find('-')) {
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line + " ";
    }
  }
  return {};
}

TEST_CASE("a buffer of 8 MiB or more is asked for 2 MiB pages; a smaller one is not") {
  sem_t wake;
  sem_init(&wake, 0, 0);
  ti::ThreadBuffer* big = ti::create_thread_buffer(/*buffer_kb=*/8192, /*tid=*/1, /*is_main=*/true, &wake);
  ti::ThreadBuffer* small = ti::create_thread_buffer(/*buffer_kb=*/1024, /*tid=*/2, /*is_main=*/false, &wake);
  REQUIRE(big != nullptr);
  REQUIRE(small != nullptr);
  ti::Segment* big_first = big->stream.write_segment();
  CHECK(reinterpret_cast<uintptr_t>(big_first) % (uintptr_t{2} << 20) == 0);
  // Two segments of half of it, each with its header.
  CHECK(big_first->map_bytes == (uint64_t{4} << 20));
  CHECK(big_first->slots == (uint64_t{4} << 20) / tw::kSlotSize - 2);
  REQUIRE(big->spares[0].load() != nullptr);
  CHECK(reinterpret_cast<char*>(big->spares[0].load()) == reinterpret_cast<char*>(big_first) + (size_t{4} << 20));
  // Whether this kernel takes the hint at all: asked of a mapping of our own.
  void* probe = mmap(nullptr, size_t{4} << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(probe != MAP_FAILED);
  const bool kernel_takes_it = madvise(probe, size_t{4} << 20, MADV_HUGEPAGE) == 0;
  munmap(probe, size_t{4} << 20);
  const std::string big_flags = vm_flags_at(big_first->data());
  const std::string small_flags = vm_flags_at(small->stream.write_segment()->data());
  REQUIRE_FALSE(big_flags.empty());
  REQUIRE_FALSE(small_flags.empty());
  if (kernel_takes_it) {
    CHECK(big_flags.find(" hg ") != std::string::npos);
  } else {
    MESSAGE("this kernel refuses MADV_HUGEPAGE: the buffer's flags are not checked");
  }
  CHECK(small_flags.find(" hg ") == std::string::npos);
  // TORCHPROF_HUGE_PAGES=0: not asked.
  ti::ThreadBuffer* plain = ti::create_thread_buffer(8192, 3, false, &wake, /*huge_pages=*/false);
  REQUIRE(plain != nullptr);
  const std::string plain_flags = vm_flags_at(plain->stream.write_segment()->data());
  REQUIRE_FALSE(plain_flags.empty());
  CHECK(plain_flags.find(" hg ") == std::string::npos);
  ti::destroy_thread_buffer(plain);
  ti::destroy_thread_buffer(small);
  ti::destroy_thread_buffer(big);
  sem_destroy(&wake);
}

TEST_CASE("recorder interns names, writes units whole and counts drops") {
  sem_t wake;
  sem_init(&wake, 0, 0);
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/true, &wake);
  REQUIRE(tb != nullptr);
  // Two segments of 16 KiB (the least), 510 slots each after the header.
  REQUIRE(tb->stream.write_segment()->slots == 510);
  CHECK(ti::record_push(tb, 0, ti::ascii_name("outer"), 0, 0) == 0);
  CHECK(ti::record_push(tb, 0, ti::ascii_name("outer"), 0, 0) == 1);
  CHECK(ti::record_pop(tb, 0) == 1);
  CHECK(ti::record_pop(tb, 0) == 0);
  CHECK(ti::record_pop(tb, 0) == -1);
  std::vector<std::string> strings;
  auto recs = drain(tb, &strings);
  REQUIRE(recs.size() == 5);  // kString, kPush, kPush, kPop, kPop: the name is defined once
  CHECK(recs[0].first == tw::Kind::kString);
  CHECK(strings == std::vector<std::string>{"outer"});
  CHECK(recs[1].second == recs[0].second);
  CHECK(recs[2].second == recs[0].second);

  // Fill both segments with a long new name each time until a unit does not fit: with
  // the cap at what the buffers hold now, the thread cannot grow past its two.
  CapGuard cap(ti::buffer_budget().held());
  std::string long_name(200, 'x');  // kString + 7 slots + the push = 9 slots
  int written = 0;
  for (int i = 0; i < 200; ++i) {
    long_name[0] = static_cast<char>('A' + i % 50);
    long_name[1] = static_cast<char>('A' + i / 50);
    uint64_t before = tb->dropped.load();
    ti::record_mark(tb, 0, ti::ascii_name(long_name.c_str()), 0, 0);
    if (tb->dropped.load() != before) {
      CHECK(tb->dropped.load() - before == 2);  // the kString and the mark
      break;
    }
    ++written;
  }
  CHECK(written == 2 * (510 / 9));
  CHECK(tb->segments_taken.load() == 1);
  drain(tb);
  // The dropped name was not interned: using it again defines it again (in the segment
  // read to its end, handed back as the spare).
  tw::BufferRefusal why{};
  ti::Segment* spare = ti::map_segment(tb->segment_bytes, /*huge_pages=*/false, &why);
  REQUIRE(spare != nullptr);  // the segment read to its end was given back: there is room for one
  tb->spares[0].store(spare, std::memory_order_relaxed);
  ti::record_mark(tb, 0, ti::ascii_name(long_name.c_str()), 0, 0);
  const auto again = drain(tb);
  REQUIRE(again.size() == 2);
  CHECK(again[0].first == tw::Kind::kString);
  ti::destroy_thread_buffer(tb);
  sem_destroy(&wake);
}

#if defined(__x86_64__)
// The clock read steps back where now_ns() changes from the TSC map to clock_gettime
// (here a map 1 s ahead, then one being replaced): the thread's records do not.
TEST_CASE("recorder: a thread's records never go back in time, even when its clock does") {
  sem_t wake;
  sem_init(&wake, 0, 0);
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/true, &wake);
  REQUIRE(tb != nullptr);
  ti::PublishedTscMap& map = ti::g_tsc_map;
  const uint32_t saved_seq = map.seq.load();
  const uint64_t saved[3] = {map.base_tsc.load(), map.base_ns.load(), map.mult.load()};
  map.seq.store(saved_seq | 1);
  map.base_tsc.store(__rdtsc());
  map.base_ns.store(ti::monotonic_ns() + 1'000'000'000);
  map.mult.store(uint64_t{1} << 31);  // half a nanosecond per tick: any rate will do
  map.seq.store((saved_seq | 1) + 1);
  ti::record_push(tb, 0, ti::ascii_name("ahead"), 0, 0);
  const uint64_t ahead = ti::now_ns();
  map.seq.store((saved_seq | 1) + 2);  // odd: being replaced, so clock_gettime, 1 s behind
  const uint64_t behind = ti::now_ns();
  ti::record_pop(tb, 0);
  ti::record_mark(tb, 0, ti::ascii_name("tick"), 0, 0);
  map.base_tsc.store(saved[0]);
  map.base_ns.store(saved[1]);
  map.mult.store(saved[2]);
  map.seq.store(saved_seq);
  CHECK(behind + 900'000'000 < ahead);  // the clock did step back
  std::vector<uint64_t> times;
  for (const tw::Record& r : drain_records(tb)) {
    if (r.kind != static_cast<uint8_t>(tw::Kind::kString)) times.push_back(r.ts);
  }
  REQUIRE(times.size() == 3);  // push, pop, mark
  CHECK(times[1] >= times[0]);
  CHECK(times[2] >= times[1]);
  // An API call's times are read around the call: what the thread records after it
  // comes after its end.
  const uint64_t exit = ti::now_ns() + 2'000'000'000;
  ti::record_api(tb, tw::Kind::kCudaRuntime, 211, ti::ascii_name("cudaLaunchKernel"), exit - 1000, exit, 7);
  ti::record_push(tb, 0, ti::ascii_name("after"), 0, 0);
  std::vector<uint64_t> after;
  for (const tw::Record& r : drain_records(tb)) {
    if (r.kind == static_cast<uint8_t>(tw::Kind::kPush)) after.push_back(r.ts);
  }
  REQUIRE(after.size() == 1);
  CHECK(after[0] >= exit);
  ti::destroy_thread_buffer(tb);
  sem_destroy(&wake);
}
#endif

TEST_CASE("names passed again from the same address: id by comparing the bytes, never by address alone") {
  sem_t wake;
  sem_init(&wake, 0, 0);
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/true, &wake);
  REQUIRE(tb != nullptr);
  char buf[64] = "forward";
  ti::NameRef first = ti::cached_ascii_name(tb, buf);
  CHECK(first.text == buf);  // not seen yet: measured and interned as usual
  CHECK(first.len == 7);
  ti::record_push(tb, 0, first, 0, 0);
  ti::NameRef again = ti::cached_ascii_name(tb, buf);
  CHECK(again.text == nullptr);  // from the cache: an id, nothing to define
  REQUIRE(again.id != 0);
  ti::record_push(tb, 0, again, 0, 0);
  // The same buffer now holds another name, then a longer one with the old as prefix.
  std::strcpy(buf, "backward");
  ti::NameRef other = ti::cached_ascii_name(tb, buf);
  CHECK(other.text == buf);
  ti::record_push(tb, 0, other, 0, 0);
  std::strcpy(buf, "backward_pass");
  CHECK(ti::cached_ascii_name(tb, buf).text == buf);
  std::strcpy(buf, "backwar");
  CHECK(ti::cached_ascii_name(tb, buf).text == buf);
  std::strcpy(buf, "backward");
  CHECK(ti::cached_ascii_name(tb, buf).id != 0);
  // A name too long for the cache still works through the intern table.
  std::string long_name(100, 'y');
  ti::record_mark(tb, 0, ti::cached_ascii_name(tb, long_name.c_str()), 0, 0);
  CHECK(ti::cached_ascii_name(tb, long_name.c_str()).text != nullptr);
  std::vector<std::string> strings;
  auto recs = drain(tb, &strings);
  CHECK(strings == std::vector<std::string>{"forward", "backward", long_name});
  REQUIRE(recs.size() == 7);  // kString, push, push, kString, push, kString, mark
  CHECK(recs[1].second == recs[0].second);
  CHECK(recs[2].second == recs[0].second);
  CHECK(recs[4].second == recs[3].second);
  CHECK(recs[3].second != recs[0].second);
  CHECK(ti::cached_ascii_name(tb, nullptr).text == nullptr);
  CHECK(ti::cached_ascii_name(tb, nullptr).id == 0);
  ti::destroy_thread_buffer(tb);
  sem_destroy(&wake);
}

TEST_CASE("the address cache keeps several names of one address, and torch's longer op names") {
  sem_t wake;
  sem_init(&wake, 0, 0);
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/true, &wake);
  REQUIRE(tb != nullptr);
  // One buffer that torch fills with another autograd node's name at each call (the SSO
  // buffer of a std::string on its stack, a heap block), and a name too long to cache.
  char block[128];
  const std::string too_long(ti::AddressCache::kMaxLen + 1, 'z');
  const char* names[] = {"autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                         "torch::autograd::AccumulateGrad", "AddmmBackward0", "TBackward0", "ReluBackward0",
                         "SubBackward0", "PowBackward0", too_long.c_str()};
  constexpr int kNames = sizeof names / sizeof names[0];
  uint32_t ids[kNames] = {};
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < kNames; ++k) {
      std::strcpy(block, names[k]);
      const ti::NameRef name = ti::cached_ascii_name(tb, block);
      if (std::strlen(names[k]) > ti::AddressCache::kMaxLen) {
        CHECK(name.text == block);  // never cached: interned by content each time
      } else if (round == 0) {
        CHECK(name.text == block);  // first sight: measured and defined
      } else {
        CHECK(name.text == nullptr);  // every later round: from the cache, the same id
        CHECK(name.id == ids[k]);
      }
      ti::record_push(tb, 0, name, 0, 0);
      ti::StringIntern::Probe probe;
      if (round == 0) ids[k] = tb->intern.find(names[k], static_cast<uint32_t>(std::strlen(names[k])), &probe);
    }
  }
  // Many literal-like names at nearby addresses: each found again, none pushed out.
  std::vector<std::string> many;
  for (int k = 0; k < 48; ++k) many.push_back("aten::op_" + std::to_string(k));
  for (const std::string& n : many) ti::record_push(tb, 0, ti::cached_ascii_name(tb, n.c_str()), 0, 0);
  int hits = 0;
  for (const std::string& n : many) hits += ti::cached_ascii_name(tb, n.c_str()).text == nullptr ? 1 : 0;
  CHECK(hits == 48);
  std::vector<std::string> strings;
  drain(tb, &strings);
  CHECK(strings.size() == kNames + 48);  // each name defined once: the long one by content
  ti::destroy_thread_buffer(tb);
  sem_destroy(&wake);
}

namespace {

// A machine for TscSteering: the TSC counts at `ghz`; CLOCK_MONOTONIC runs `ppm` off
// it (NTP's slewing) and each pair is read with up to 40 ns of jitter.
struct SimulatedClocks {
  double ghz = 2.5;
  double ppm = 0;
  double true_ns = 1e12;         // time since boot, by the TSC
  double mono_ns = 1e12 + 7e9;   // CLOCK_MONOTONIC
  std::mt19937_64 rng{42};

  void advance(double ns) {
    true_ns += ns;
    mono_ns += ns * (1 + ppm * 1e-6);
  }
  uint64_t tsc_at(double ns) const { return static_cast<uint64_t>(ns * ghz) + 123456789; }
  uint64_t tsc() const { return tsc_at(true_ns); }
  uint64_t mono_read() { return static_cast<uint64_t>(mono_ns) + rng() % 40; }
};

}  // namespace

TEST_CASE("TSC map: ticks before its base map to times before it") {
  ti::TscMap m{1000, 5000000, uint64_t{1} << 31};  // 0.5 ns per tick
  CHECK(ti::tsc_map_ns(m, 1000) == 5000000);
  CHECK(ti::tsc_map_ns(m, 3000) == 5001000);
  CHECK(ti::tsc_map_ns(m, 800) == 4999900);
}

TEST_CASE("TSC steering: the map follows CLOCK_MONOTONIC, never jumps back, and starts over after a sleep") {
  SimulatedClocks clocks;
  clocks.ppm = 40;
  ti::TscSteering steer;
  CHECK_FALSE(steer.update(clocks.tsc(), clocks.mono_read()));
  clocks.advance(10e6);
  CHECK_FALSE(steer.update(clocks.tsc(), clocks.mono_read()));  // 10 ms: too short to measure the rate
  CHECK(steer.map().mult == 0);
  clocks.advance(10e6);
  REQUIRE(steer.update(clocks.tsc(), clocks.mono_read()));
  const double expected_ghz = clocks.ghz / (1 + clocks.ppm * 1e-6);  // TSC ticks per CLOCK_MONOTONIC ns
  CHECK(std::fabs(4294967296.0 / static_cast<double>(steer.map().mult) / expected_ghz - 1) < 5e-6);

  ti::TscMap prev = steer.map();
  int published = 0;
  double worst_steady = 0, worst_turn = 0, worst_after = 0;  // |map - CLOCK_MONOTONIC|, ns
  for (int i = 0; i < 3000; ++i) {  // 60 s, a pair every 20 ms
    if (i == 1500) clocks.ppm = -60;  // NTP turns the other way by 100 ppm
    // Between pairs the map is read at many points: never backwards.
    for (int k = 1; k <= 4; ++k) {
      const double at = clocks.true_ns + 5e6 * k;
      REQUIRE(ti::tsc_map_ns(steer.map(), clocks.tsc_at(at)) > ti::tsc_map_ns(steer.map(), clocks.tsc_at(at - 1)));
    }
    clocks.advance(20e6);
    const uint64_t tsc = clocks.tsc();
    const uint64_t mono = clocks.mono_read();
    const double off = std::fabs(static_cast<double>(ti::tsc_map_ns(steer.map(), tsc)) - static_cast<double>(mono));
    if (i >= 100 && i < 1500) worst_steady = std::max(worst_steady, off);
    if (i >= 1500 && i < 2000) worst_turn = std::max(worst_turn, off);
    if (i >= 2000) worst_after = std::max(worst_after, off);
    if (steer.update(tsc, mono)) {
      ++published;
      // Re-anchored where the old map stood: time goes on, without a step.
      CHECK(steer.map().base_ns == ti::tsc_map_ns(prev, steer.map().base_tsc));
      prev = steer.map();
    }
  }
  CHECK(published >= 900);  // every 25 ms at most: here every other pair
  CHECK(published <= 1500);
  CHECK(steer.resets() == 0);
  CHECK(worst_steady < 500);
  CHECK(worst_turn < 40000);  // 100 ppm at once: about 100e-6 * kSteerNs
  CHECK(worst_after < 500);
  MESSAGE("distance from CLOCK_MONOTONIC: steady " << worst_steady << " ns, NTP turning " << worst_turn
                                                   << " ns, after " << worst_after << " ns");

  // The machine sleeps: CLOCK_MONOTONIC stops while the TSC goes on 30 s.
  clocks.true_ns += 30e9;
  clocks.advance(60e6);
  REQUIRE(steer.update(clocks.tsc(), clocks.mono_read()));
  CHECK(steer.resets() == 1);
  for (int i = 0; i < 50; ++i) {
    clocks.advance(20e6);
    steer.update(clocks.tsc(), clocks.mono_read());
  }
  CHECK(std::fabs(static_cast<double>(ti::tsc_map_ns(steer.map(), clocks.tsc())) - clocks.mono_ns) < 2000);
}

TEST_CASE("now_ns: the TSC map, once calibrated, reads as CLOCK_MONOTONIC") {
  const uint64_t before = ti::now_ns();
  CHECK(std::llabs(static_cast<long long>(before - ti::monotonic_ns())) < 1000000);
  if (ti::tsc_clock_unavailable() != nullptr) {
    MESSAGE("the TSC is not used here: " << ti::tsc_clock_unavailable());
    return;
  }
  ti::tsc_clock_tick();
  bool published = false;
  for (int i = 0; i < 20 && !published; ++i) {
    timespec nap{0, 10'000'000};
    nanosleep(&nap, nullptr);
    published = ti::tsc_clock_tick();
  }
  REQUIRE(published);
  // A shared machine may stop this thread between the two reads: the closest of many.
  long long closest = -1;
  uint64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t t = ti::now_ns();
    const uint64_t m = ti::monotonic_ns();
    CHECK(t >= last);
    last = t;
    const long long d = std::llabs(static_cast<long long>(m - t));
    if (closest < 0 || d < closest) closest = d;
  }
  CHECK(closest < 20000);
  MESSAGE("now_ns against clock_gettime: " << closest << " ns apart at the closest");
}
