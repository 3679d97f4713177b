// Unit tests of the injected library's buffers: the segment stream (units whole, the
// reader following the chain), a thread's growth within the process's cap with exact
// drop counting past it, the flusher's spares and pool, the budget, and the cap's setting.
#include <doctest/doctest.h>
#include <semaphore.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "inject/buffer_budget.h"
#include "inject/config.h"
#include "inject/recorder.h"
#include "inject/segment_pool.h"
#include "inject/segment_stream.h"
#include "inject/thread_buffer.h"

namespace ti = torchprof::inject;
namespace tw = torchprof::wire;

namespace {

constexpr uint64_t kSegment = 16 << 10;  // the segments of a 16 KiB buffer: 510 slots each

class CapGuard {
 public:
  explicit CapGuard(uint64_t bytes) : saved_(ti::buffer_budget().cap()) { ti::buffer_budget().set_cap(bytes); }
  ~CapGuard() { ti::buffer_budget().set_cap(saved_); }
  CapGuard(const CapGuard&) = delete;
  CapGuard& operator=(const CapGuard&) = delete;

 private:
  uint64_t saved_;
};

struct Wake {
  sem_t sem;
  Wake() { sem_init(&sem, 0, 0); }
  ~Wake() { sem_destroy(&sem); }
  int posts() {
    int n = 0;
    while (sem_trywait(&sem) == 0) ++n;
    return n;
  }
};

// Reads everything up to the head; the segments read to their end go to `pool`, or are
// unmapped without one. Returns the record heads.
std::vector<tw::Record> read_all(ti::ThreadBuffer* tb, ti::SegmentPool* pool = nullptr) {
  std::vector<tw::Record> out;
  const uint64_t head = tb->stream.consumer_head();
  for (;;) {
    uint64_t n = 0;
    ti::Segment* finished = nullptr;
    const tw::Record* p = tb->stream.peek(head, &n, &finished);
    if (pool != nullptr) {
      pool->put_list(finished);
    } else {
      while (finished != nullptr) {
        ti::Segment* next = finished->link;
        ti::unmap_segment(finished);
        finished = next;
      }
    }
    if (n == 0) return out;
    for (uint64_t i = 0; i < n; i += 1 + p[i].extra) out.push_back(p[i]);
    tb->stream.consume(n);
  }
}

uint32_t armed(const ti::ThreadBuffer* tb) {
  uint32_t n = 0;
  for (const auto& s : tb->spares) n += s.load() != nullptr;
  return n;
}

// Marks named "m" (one slot each once the name is defined) until the thread has moved
// to `segments` other segments; returns the marks written.
int mark_until(ti::ThreadBuffer* tb, uint64_t segments, uint64_t* payload) {
  int n = 0;
  while (tb->segments_taken.load() < segments) {
    REQUIRE(n < 100000);  // a thread that never moves on: no growth at all
    ti::record_mark(tb, 0, ti::ascii_name("m"), 0, (*payload)++);
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("segment stream: a unit never crosses a segment's end; the reader follows the chain") {
  tw::BufferRefusal why{};
  ti::Segment* first = ti::map_segment(kSegment, /*huge_pages=*/false, &why);
  ti::Segment* second = ti::map_segment(kSegment, /*huge_pages=*/false, &why);
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  REQUIRE(first->slots == 510);
  ti::SegmentStream st;
  st.init(first);
  uint64_t units = 0;
  auto write_unit = [&](uint64_t n) {  // n slots, the first one's `a` numbering the unit
    for (uint64_t i = 0; i < n; ++i) tw::store_record(st.slot(i), 2, 0, 0, 0, 0, i == 0 ? units : ~uint64_t{0}, 0);
    st.commit(n);
    ++units;
  };
  while (st.has_room(4)) write_unit(4);
  CHECK(units == 510 / 4);
  CHECK_FALSE(st.has_room(4));
  CHECK(st.has_room(510 % 4));
  // The reader reads what is there while the writer is still in the first segment.
  uint64_t n = 0;
  ti::Segment* finished = nullptr;
  const uint64_t head_before = st.consumer_head();
  const tw::Record* p = st.peek(head_before, &n, &finished);
  CHECK(n == 4 * units);
  CHECK(p[4].a == 1);
  st.consume(n - 4);  // all but the last unit
  st.advance(second);
  CHECK(first->end == 4 * units);
  CHECK(second->base == 4 * units);  // the two slots left over are not stream positions
  write_unit(4);
  write_unit(4);
  // A head read before the writer moved on: only what was there then, the last unit of the first.
  p = st.peek(head_before, &n, &finished);
  CHECK(n == 4);
  CHECK(p[0].a == units - 3);
  CHECK(finished == nullptr);
  st.consume(n);
  // The new head: the first segment is handed back, then the second is read.
  p = st.peek(st.consumer_head(), &n, &finished);
  CHECK(finished == first);
  CHECK(finished->link == nullptr);
  REQUIRE(n == 8);
  CHECK(p[0].a == units - 2);
  CHECK(p[4].a == units - 1);
  st.consume(n);
  finished = nullptr;
  p = st.peek(st.consumer_head(), &n, &finished);
  CHECK(n == 0);
  CHECK(finished == nullptr);  // the writer's segment stays
  CHECK(st.read_segment() == second);
  ti::unmap_segment(first);
  ti::unmap_segment(second);
}

TEST_CASE("a thread grows past its two segments within the cap, and drops only past it, counted exactly") {
  ti::buffer_budget().forget_loss();
  Wake wake;
  const uint64_t held_before = ti::buffer_budget().held();
  const uint64_t maps_before = ti::buffer_budget().producer_maps();
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/true, &wake.sem);
  REQUIRE(tb != nullptr);
  CHECK(ti::buffer_budget().held() == held_before + 2 * kSegment);
  CapGuard cap(held_before + 5 * kSegment);  // room for three segments more
  const int emitted = 4000;
  for (int i = 0; i < emitted; ++i) ti::record_mark(tb, 0, ti::ascii_name("m"), 0, static_cast<uint64_t>(i));
  // The spare, then three it mapped itself; then the cap.
  CHECK(tb->segments_taken.load() == 4);
  CHECK(ti::buffer_budget().producer_maps() - maps_before == 3);
  CHECK(ti::buffer_budget().held() == held_before + 5 * kSegment);
  CHECK(ti::buffer_budget().peak() >= held_before + 5 * kSegment);
  CHECK(wake.posts() >= 4);  // each move wakes the flusher
  const ti::BufferBudget::Refusal loss = ti::buffer_budget().first_loss();
  CHECK(loss.ts != 0);
  CHECK(loss.why == tw::BufferRefusal::kCap);
  CHECK(loss.held == held_before + 5 * kSegment);
  const std::vector<tw::Record> got = read_all(tb);
  // The name's kString, then the marks in order, as many as five segments hold.
  REQUIRE(got.size() > 1);
  CHECK(got[0].kind == static_cast<uint8_t>(tw::Kind::kString));
  const uint64_t recorded_marks = got.size() - 1;
  CHECK(recorded_marks == 5 * 510 - 2);  // 2 slots of the first segment hold the name
  for (uint64_t i = 1; i < got.size(); ++i) CHECK(got[i].b == i - 1);
  CHECK(recorded_marks + tb->dropped.load() == static_cast<uint64_t>(emitted));
  // What was read is handed back (here unmapped): the thread holds its writing segment.
  CHECK(ti::buffer_budget().held() == held_before + kSegment);
  ti::destroy_thread_buffer(tb);
  CHECK(ti::buffer_budget().held() == held_before);
  ti::buffer_budget().forget_loss();
}

TEST_CASE("the flusher's spares: a busy thread finds them ready and maps none; a quiet one gives the extras back") {
  Wake wake;
  const uint64_t held_before = ti::buffer_budget().held();
  const uint64_t maps_before = ti::buffer_budget().producer_maps();
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/true, &wake.sem);
  REQUIRE(tb != nullptr);
  ti::SegmentPool pool;
  uint64_t payload = 0;
  uint64_t now = 1'000'000'000;
  pool.tend(tb, now);
  CHECK(armed(tb) == 1);  // a new thread: the other half of its pair
  mark_until(tb, 1, &payload);
  pool.tend(tb, now += 1'000'000);
  CHECK(armed(tb) == 3);  // one for the next segment, two for the one it filled since the last look
  CHECK(pool.size() == 0);
  mark_until(tb, 4, &payload);
  CHECK(ti::buffer_budget().producer_maps() == maps_before);  // spares only
  CHECK(armed(tb) == 0);
  read_all(tb, &pool);
  CHECK(pool.size() == 4);  // the four segments read to their end
  pool.tend(tb, now += 1'000'000);
  CHECK(armed(tb) == 7);  // it moved three times: 1 + 2 x 3, four of them from the pool
  CHECK(pool.size() == 0);
  // Quiet for less than kQuietNs: kept; longer: all but one go back.
  pool.tend(tb, now += ti::SegmentPool::kQuietNs / 2);
  CHECK(armed(tb) == 7);
  pool.tend(tb, now += ti::SegmentPool::kQuietNs);
  CHECK(armed(tb) == 1);
  CHECK(pool.size() == 6);
  const uint64_t held = ti::buffer_budget().held();
  pool.trim(0);
  CHECK(ti::buffer_budget().held() == held - 6 * kSegment);
  std::vector<tw::Record> got = read_all(tb, &pool);
  CHECK(ti::buffer_budget().producer_maps() == maps_before);
  CHECK(tb->dropped.load() == 0);
  ti::destroy_thread_buffer(tb);
  pool.trim(0);
  CHECK(ti::buffer_budget().held() == held_before);
}

TEST_CASE("large segments: spares beyond the first come from what is kept, never newly mapped") {
  Wake wake;
  const uint64_t held_before = ti::buffer_budget().held();
  // Two 8 MiB segments: 4 MiB of new spares is less than one.
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16384, /*tid=*/1, /*is_main=*/true, &wake.sem,
                                                  /*huge_pages=*/false);
  REQUIRE(tb != nullptr);
  REQUIRE(tb->segment_bytes == uint64_t{8} << 20);
  ti::SegmentPool pool;
  uint64_t now = 1'000'000'000;
  REQUIRE(ti::move_to_spare(tb));
  pool.tend(tb, now += 1'000'000);
  CHECK(armed(tb) == 1);  // one new mapping, not three
  tw::BufferRefusal why{};
  ti::Segment* kept[2] = {ti::map_segment(tb->segment_bytes, /*huge_pages=*/false, &why),
                          ti::map_segment(tb->segment_bytes, /*huge_pages=*/false, &why)};
  REQUIRE(kept[0] != nullptr);
  REQUIRE(kept[1] != nullptr);
  kept[0]->link = kept[1];
  pool.put_list(kept[0]);
  REQUIRE(ti::move_to_spare(tb));
  pool.tend(tb, now += 1'000'000);
  CHECK(armed(tb) == 2);  // both kept ones, no new one
  CHECK(pool.size() == 0);
  read_all(tb);
  ti::destroy_thread_buffer(tb);
  CHECK(ti::buffer_budget().held() == held_before);
}

TEST_CASE("at the cap, the flusher hands the segment it has read back to the thread that is dropping") {
  ti::buffer_budget().forget_loss();
  Wake wake;
  const uint64_t held_before = ti::buffer_budget().held();
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/true, &wake.sem);
  REQUIRE(tb != nullptr);
  CapGuard cap(ti::buffer_budget().held());  // no growth at all
  ti::SegmentPool pool;
  uint64_t payload = 0;
  uint64_t emitted = 0;
  uint64_t recorded = 0;
  for (int round = 0; round < 5; ++round) {
    // Fill what the thread has, and a little more that is dropped.
    while (tb->dropped.load() < static_cast<uint64_t>(round + 1) * 10) {
      REQUIRE(emitted < 100000);  // a cap that never stops the thread
      ti::record_mark(tb, 0, ti::ascii_name("m"), 0, payload++);
      ++emitted;
    }
    for (const tw::Record& r : read_all(tb, &pool)) recorded += r.kind == static_cast<uint8_t>(tw::Kind::kMark);
    pool.tend(tb, 1'000'000'000 + static_cast<uint64_t>(round));
    CHECK(armed(tb) >= 1);  // what it filled comes back to it, within the cap
  }
  CHECK(recorded + tb->dropped.load() == emitted);
  CHECK(recorded > 5 * 500);  // it went on recording between the drops
  CHECK(ti::buffer_budget().held() <= ti::buffer_budget().cap());
  ti::destroy_thread_buffer(tb);
  pool.trim(0);
  CHECK(ti::buffer_budget().held() == held_before);
  ti::buffer_budget().forget_loss();
}

TEST_CASE("a writer and a reader at once: every record once, in order, and the memory back at the end") {
  Wake wake;
  const uint64_t held_before = ti::buffer_budget().held();
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/true, &wake.sem);
  REQUIRE(tb != nullptr);
  constexpr uint64_t kMarks = 300000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (uint64_t i = 0; i < kMarks; ++i) ti::record_mark(tb, 0, ti::ascii_name("m"), 0, i);
    done.store(true, std::memory_order_release);
  });
  ti::SegmentPool pool;
  uint64_t expect = 0;
  bool in_order = true;
  uint64_t now = 0;
  for (bool last = false; !last;) {
    last = done.load(std::memory_order_acquire);
    for (const tw::Record& r : read_all(tb, &pool)) {
      if (r.kind != static_cast<uint8_t>(tw::Kind::kMark)) continue;
      in_order = in_order && r.b == expect;
      ++expect;
    }
    pool.tend(tb, now += 1000);
    pool.trim_for(now);
  }
  writer.join();
  CHECK(in_order);
  CHECK(expect == kMarks);
  CHECK(tb->dropped.load() == 0);  // under the default cap nothing is dropped
  ti::destroy_thread_buffer(tb);
  pool.trim(0);
  CHECK(ti::buffer_budget().held() == held_before);
}

TEST_CASE("the GPU stream moves to a spare only, or starts its segment over once all is read") {
  ti::buffer_budget().forget_loss();
  Wake wake;
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/1, /*is_main=*/false, &wake.sem);
  REQUIRE(tb != nullptr);
  const uint64_t maps_before = ti::buffer_budget().producer_maps();
  ti::record_mark(tb, 0, ti::ascii_name("m"), 0, 0);
  CHECK(ti::move_to_spare(tb));  // the other half of its pair
  CHECK_FALSE(ti::move_to_spare(tb));
  CHECK(tb->segments_taken.load() == 1);
  CHECK(ti::buffer_budget().producer_maps() == maps_before);
  CHECK(ti::buffer_budget().first_loss().ts == 0);
  // Fill the segment it is in, then: not while unread, nor while the first segment is
  // still to be handed back; once read, it starts over with room for a whole segment.
  while (tb->stream.has_room(1)) ti::record_mark(tb, 0, ti::ascii_name("m"), 0, 1);
  CHECK_FALSE(tb->stream.rewind());
  uint64_t n = 0;
  ti::Segment* finished = nullptr;
  tb->stream.peek(tb->stream.consumer_head(), &n, &finished);
  tb->stream.consume(n);  // the first segment read, not yet handed back
  CHECK_FALSE(tb->stream.rewind());
  std::vector<tw::Record> got = read_all(tb);
  ti::unmap_segment(finished);
  CHECK(got.size() == 510);  // the second segment, whole
  const uint64_t head = tb->stream.producer_head();
  REQUIRE(tb->stream.rewind());
  CHECK(tb->stream.has_room(510));
  ti::record_mark(tb, 0, ti::ascii_name("m"), 0, 2);
  got = read_all(tb);
  REQUIRE(got.size() == 1);
  CHECK(got[0].b == 2);
  CHECK(tb->stream.consumer_tail() == head + 1);  // positions go on
  CHECK(tb->dropped.load() == 0);
  ti::destroy_thread_buffer(tb);
}

TEST_CASE("budget: the cap stops take() but not a first buffer; the peak is the most held") {
  ti::BufferBudget b;
  b.set_cap(100);
  CHECK(b.take(60));
  CHECK_FALSE(b.take(41));
  CHECK(b.take(40));
  CHECK(b.held() == 100);
  CHECK_FALSE(b.take(1));
  b.take_anyway(50);  // past the cap
  CHECK(b.held() == 150);
  CHECK_FALSE(b.take(1));
  b.give(120);
  CHECK(b.held() == 30);
  CHECK(b.peak() == 150);
  CHECK(b.first_loss().ts == 0);
  b.note_loss(tw::BufferRefusal::kSystem, 1234);
  b.note_loss(tw::BufferRefusal::kCap, 5678);  // only the first is kept
  CHECK(b.first_loss().ts == 1234);
  CHECK(b.first_loss().why == tw::BufferRefusal::kSystem);
  CHECK(b.first_loss().held == 30);
  b.reset_after_fork();
  CHECK(b.held() == 0);
  CHECK(b.peak() == 0);
  CHECK(b.first_loss().ts == 0);
}

TEST_CASE("TORCHPROF_BUFFER_LIMIT: MiB by default, K/M/G suffixes, nothing else and nothing out of range") {
  CHECK(ti::parse_buffer_size("256") == uint64_t{256} << 20);
  CHECK(ti::parse_buffer_size("512K") == uint64_t{512} << 10);
  CHECK(ti::parse_buffer_size("2m") == uint64_t{2} << 20);
  CHECK(ti::parse_buffer_size("1G") == uint64_t{1} << 30);
  CHECK(ti::parse_buffer_size("1GiB") == uint64_t{1} << 30);
  CHECK(ti::parse_buffer_size("64KB") == uint64_t{64} << 10);
  CHECK(ti::parse_buffer_size("1024G") == uint64_t{1} << 40);
  CHECK(ti::parse_buffer_size("1025G") == 0);
  CHECK(ti::parse_buffer_size("32K") == 0);
  CHECK(ti::parse_buffer_size("0") == 0);
  CHECK(ti::parse_buffer_size("-1") == 0);
  CHECK(ti::parse_buffer_size("12X") == 0);
  CHECK(ti::parse_buffer_size("") == 0);
  CHECK(ti::parse_buffer_size("M") == 0);
  CHECK(ti::parse_buffer_size("99999999999999999999999") == 0);
}

namespace {

// Pages of [p, p + bytes) the process has in memory now.
size_t resident_pages(const void* p, size_t bytes) {
  const size_t page = 4096;
  std::vector<unsigned char> in(bytes / page);
  REQUIRE(mincore(const_cast<void*>(p), bytes, in.data()) == 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

}  // namespace

TEST_CASE("the first block is faulted in for a busy thread, and only while both halves are the thread's") {
  Wake wake;
  uint64_t payload = 0;
  SUBCASE("a thread that writes little keeps the pages it touched") {
    ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/1024, 1, true, &wake.sem);
    REQUIRE(tb != nullptr);
    void* block = tb->first_block;
    REQUIRE(block != nullptr);
    CHECK(tb->first_block_bytes == 1u << 20);
    for (int i = 0; i < 100; ++i) ti::record_mark(tb, 0, ti::ascii_name("m"), 0, payload++);
    const size_t before = resident_pages(block, tb->first_block_bytes);
    ti::populate_first_block(tb);
    CHECK(tb->first_block == block);  // not yet: it may never write more
    CHECK(resident_pages(block, 1u << 20) == before);
    // Past kPopulateAfterSlots: every page of both halves, and the records as written.
    while (tb->stream.consumer_head() < ti::kPopulateAfterSlots) {
      ti::record_mark(tb, 0, ti::ascii_name("m"), 0, payload++);
    }
    ti::populate_first_block(tb);
    CHECK(tb->first_block == nullptr);
#ifdef MADV_POPULATE_WRITE
    CHECK(resident_pages(block, 1u << 20) == 256);
#endif
    const std::vector<tw::Record> recs = read_all(tb);
    REQUIRE(recs.size() == payload + 1);  // the name's kString, then every mark
    for (uint64_t i = 0; i < payload; ++i) CHECK(recs[i + 1].b == i);
    ti::destroy_thread_buffer(tb);
  }
  SUBCASE("a thread already past its first segment is left as it is") {
    ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, 1, true, &wake.sem);
    REQUIRE(tb != nullptr);
    mark_until(tb, 1, &payload);
    ti::populate_first_block(tb);
    CHECK(tb->first_block == nullptr);
    read_all(tb);
    ti::destroy_thread_buffer(tb);
  }
}
