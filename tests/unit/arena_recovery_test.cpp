// The shared arena from both ends: a thread's buffer written by the injected library's
// own code, read back by the collector's recovery as if the process had been killed,
// with the flusher's position protocol (a frame in flight, segments handed back), and
// an arena of nonsense that must cost nothing but its own records.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "collector/shared_arena.h"
#include "common/wire/arena.h"
#include "common/wire/wire.h"
#include "inject/arena.h"
#include "inject/recorder.h"
#include "inject/thread_buffer.h"

namespace ti = torchprof::inject;
namespace tw = torchprof::wire;
namespace ta = torchprof::wire::arena;
using torchprof::SharedArena;

namespace {

struct Wake {
  sem_t sem;
  Wake() { sem_init(&sem, 0, 0); }
  ~Wake() { sem_destroy(&sem); }
};

struct Decoded {
  std::map<uint32_t, std::vector<uint32_t>> seqs;  // per tid, frame numbers in order
  std::vector<tw::Record> heads;
  uint64_t marks = 0;
  uint64_t recovered = 0;     // kRecovered.a
  uint64_t unreadable = 0;    // kRecovered.b
  uint64_t emitted = 0;       // the last kDropped.b
  uint64_t dropped = 0;       // the last kDropped.a
  uint64_t first_mark = 0;    // b of the first mark
};

struct Read {
  SharedArena::Recovery r;
  std::vector<std::string> frames;
};

Read read_from(const char* map, uint64_t size, const std::map<uint32_t, uint32_t>& next_seq) {
  Read out;
  out.r = SharedArena::recover_from(map, size, next_seq, [&](const std::string& body) { out.frames.push_back(body); });
  CHECK(out.r.frames == out.frames.size());
  return out;
}

Decoded decode(const Read& read) {
  Decoded d;
  bool any_mark = false;
  for (const std::string& body : read.frames) {
    REQUIRE(body.size() >= sizeof(tw::FrameHeader));
    tw::FrameHeader fh{};
    std::memcpy(&fh, body.data(), sizeof fh);
    CHECK(fh.encoding == static_cast<uint32_t>(tw::FrameEncoding::kZstdRaw));
    d.seqs[fh.tid].push_back(fh.seq);
    std::vector<tw::Record> slots(fh.raw_size / sizeof(tw::Record));
    const size_t n = ZSTD_decompress(slots.data(), fh.raw_size, body.data() + sizeof fh, body.size() - sizeof fh);
    REQUIRE(n == fh.raw_size);
    for (size_t i = 0; i < slots.size(); i += 1 + slots[i].extra) {
      const tw::Record& x = slots[i];
      d.heads.push_back(x);
      switch (static_cast<tw::Kind>(x.kind)) {
        case tw::Kind::kMark:
          if (!any_mark) d.first_mark = x.b;
          any_mark = true;
          ++d.marks;
          break;
        case tw::Kind::kRecovered:
          d.recovered += x.a;
          d.unreadable += x.b;
          break;
        case tw::Kind::kDropped:
          d.dropped = x.a;
          d.emitted = x.b;
          break;
        default: break;
      }
    }
  }
  return d;
}

Read recover(const std::map<uint32_t, uint32_t>& next_seq = {}) {
  ti::Arena& a = ti::arena();
  REQUIRE(a.ready());
  return read_from(reinterpret_cast<const char*>(a.base()), a.size(), next_seq);
}

// Reads and hands back (to the arena) everything up to the head, as the flusher would,
// and publishes the position after it.
void send_all(ti::ThreadBuffer* tb) {
  const uint64_t head = tb->stream.consumer_head();
  for (;;) {
    uint64_t n = 0;
    ti::Segment* finished = nullptr;
    const tw::Record* p = tb->stream.peek(head, &n, &finished);
    while (finished != nullptr) {
      ti::Segment* next = finished->link;
      ti::unmap_segment(finished);  // zeroed in the arena: reading it again would show
      finished = next;
    }
    if (n == 0) break;
    for (uint64_t i = 0; i < n; i += 1 + p[i].extra) ++tb->drained;
    tb->stream.consume(n);
  }
  tb->seq += 1;
  ti::publish_arena_position(tb);
}

}  // namespace

TEST_CASE("arena: what a thread recorded and nobody sent is read back whole, across its segments") {
  Wake wake;
  ti::ThreadBuffer* tb = ti::create_thread_buffer(/*buffer_kb=*/16, /*tid=*/4242, /*is_main=*/true, &wake.sem);
  REQUIRE(tb != nullptr);
  REQUIRE(tb->arena_slot != nullptr);
  CHECK(ti::arena().contains(tb));
  const uint64_t emitted = 3000;  // about six segments of 510 slots
  for (uint64_t i = 0; i < emitted; ++i) ti::record_mark(tb, 0, ti::ascii_name("killed"), 0, i);
  REQUIRE(tb->segments_taken.load() >= 4);

  Decoded d = decode(recover());
  CHECK(d.marks == emitted);
  CHECK(d.first_mark == 0);
  REQUIRE(!d.heads.empty());
  CHECK(d.heads.front().kind == static_cast<uint8_t>(tw::Kind::kString));  // the name's definition
  CHECK(d.recovered == emitted + 1);
  CHECK(d.unreadable == 0);
  CHECK(d.emitted == emitted + 1);
  CHECK(d.dropped == 0);
  REQUIRE(d.seqs.count(4242) == 1);
  CHECK(d.seqs[4242].front() == 0);
  for (size_t i = 1; i < d.seqs[4242].size(); ++i) CHECK(d.seqs[4242][i] == d.seqs[4242][i - 1] + 1);

  SUBCASE("after a send, only what came after it; the segments handed back are never read") {
    send_all(tb);
    for (uint64_t i = 0; i < 700; ++i) ti::record_mark(tb, 0, ti::ascii_name("killed"), 0, emitted + i);
    Decoded rest = decode(recover({{4242, 1}}));
    CHECK(rest.marks == 700);
    CHECK(rest.first_mark == emitted);
    CHECK(rest.recovered == 700);
    CHECK(rest.emitted == emitted + 1 + 700);  // drained before, plus what is read here
    CHECK(rest.seqs[4242].front() == 1);
  }

  SUBCASE("a frame in flight: the position after it holds only if it arrived") {
    ti::publish_arena_position(tb);  // nothing sent yet: position 0
    tw::arena::ThreadSlot* slot = tb->arena_slot;
    const uint32_t current = slot->word.load() & 1u;
    // The flusher's send_frame: the position after the frame in the other copy, then "sending".
    const uint64_t head = tb->stream.consumer_head();
    uint64_t n = 0;
    ti::Segment* finished = nullptr;
    tb->stream.peek(head, &n, &finished);
    REQUIRE(n > 100);
    tb->stream.consume(100);  // 100 slots: the name's 2 and 98 marks
    tb->drained = 99;
    slot->at[current ^ 1u] = ti::arena_position(tb);
    slot->at[current ^ 1u].next_seq = 8;
    slot->sending_seq = 7;
    slot->word.store(current | 2u);
    Decoded lost_in_flight = decode(recover({{4242, 7}}));  // frame 7 never arrived
    CHECK(lost_in_flight.marks == emitted);
    CHECK(lost_in_flight.seqs[4242].front() == 7);
    Decoded arrived = decode(recover({{4242, 8}}));
    CHECK(arrived.marks == emitted - 98);
    CHECK(arrived.first_mark == 98);
    CHECK(arrived.emitted == emitted + 1);
    CHECK(arrived.seqs[4242].front() == 8);
  }
  ti::destroy_thread_buffer(tb);
  // Its slot is free again: nothing of it is read any more.
  CHECK(decode(recover()).seqs.count(4242) == 0);
}

TEST_CASE("arena: a buffer of nonsense is read without a fault and costs only its own records") {
  std::vector<char> mem(ta::kDataOffset + (64 << 10), 0);
  const uint64_t base = 0x7f0000000000ull;
  ta::Header h{ta::kMagic, ta::kVersion, ta::kMaxThreads, mem.size(), base};
  std::memcpy(mem.data(), &h, sizeof h);
  auto put = [&](uint64_t off, uint64_t v) { std::memcpy(mem.data() + off, &v, sizeof v); };
  auto slot_at = [&](uint32_t i, uint32_t tid, uint64_t head_at, uint64_t segment, uint64_t pos) {
    const uint64_t at = ta::slot_offset(i);
    const uint32_t live = ta::kLive;
    std::memcpy(mem.data() + at + offsetof(ta::ThreadSlot, state), &live, 4);
    std::memcpy(mem.data() + at + offsetof(ta::ThreadSlot, tid), &tid, 4);
    put(at + offsetof(ta::ThreadSlot, head_at), head_at);
    put(at + offsetof(ta::ThreadSlot, dropped_at), ta::kDataOffset + 56);
    put(at + offsetof(ta::ThreadSlot, at) + offsetof(ta::Position, segment), segment);
    put(at + offsetof(ta::ThreadSlot, at) + offsetof(ta::Position, pos), pos);
  };
  // A segment at kDataOffset + 64 of 100 slots holding 10 marks, whose `next` points outside.
  const uint64_t seg = ta::kDataOffset + 64;
  put(seg + ta::kSegmentNext, 0x1234);
  put(seg + ta::kSegmentBase, 0);
  put(seg + ta::kSegmentEnd, 10);
  put(seg + ta::kSegmentSlots, 100);
  for (int i = 0; i < 10; ++i) {
    tw::Record r{static_cast<uint8_t>(tw::Kind::kMark), 0, 0, 1, 5, 0, static_cast<uint64_t>(i)};
    std::memcpy(mem.data() + seg + ta::kSegmentHeaderBytes + i * sizeof r, &r, sizeof r);
  }
  put(ta::kDataOffset, 40);  // a head past the segment's end: 30 slots nobody can find
  slot_at(0, 1, ta::kDataOffset, seg, 0);
  slot_at(1, 2, mem.size() - 4, seg, 0);              // its head out of bounds: skipped
  slot_at(2, 3, ta::kDataOffset, mem.size() + 64, 0);  // its segment out of bounds
  slot_at(3, 4, ta::kDataOffset, seg, 50);             // a position past the segment's records
  put(ta::kDataOffset + 8, ~uint64_t{0});
  slot_at(4, 5, ta::kDataOffset + 8, seg, 0);          // a head of 2^64 - 1
  const Read read = read_from(mem.data(), mem.size(), {});
  const SharedArena::Recovery& r = read.r;
  const Decoded d = decode(read);
  CHECK(d.seqs.count(1) == 1);
  CHECK(d.seqs.count(2) == 0);
  CHECK(d.seqs.count(3) == 1);  // nothing read, 40 slots said lost
  CHECK(d.seqs.count(4) == 0);
  CHECK(d.seqs.count(5) == 0);  // more than the arena could hold: not believed
  CHECK(d.marks == 10);
  CHECK(r.heads == 10);
  CHECK(r.unreadable_slots == 30 + 40);
  CHECK(d.unreadable == 30 + 40);
}

TEST_CASE("arena: the collector takes only a memfd sealed against resizing, of the layout it knows") {
  const int fd = memfd_create("test-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, static_cast<off_t>(ta::kDataOffset + 65536)) == 0);
  const ta::ArenaInfo info{ta::kDataOffset + 65536, 0x1000, ta::kVersion, sizeof(ta::ThreadSlot)};
  SharedArena unsealed;
  CHECK(unsealed.open(dup(fd), info).find("not sealed") != std::string::npos);
  CHECK(!unsealed.mapped());
  REQUIRE(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  SharedArena no_header;
  CHECK(no_header.open(dup(fd), info).find("do not say") != std::string::npos);
  ta::Header h{ta::kMagic, ta::kVersion, ta::kMaxThreads, info.size, info.base};
  REQUIRE(pwrite(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h));
  ta::ArenaInfo other = info;
  other.size += 4096;
  SharedArena wrong_size;
  CHECK(wrong_size.open(dup(fd), other).find("another layout") != std::string::npos);
  SharedArena good;
  CHECK(good.open(dup(fd), info).empty());
  CHECK(good.mapped());
  CHECK(good.recover({}, [](const std::string&) {}).frames == 0);
  close(fd);
}
