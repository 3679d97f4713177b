#include "inject/thread_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "inject/arena.h"
#include "inject/buffer_budget.h"
#include "inject/clock.h"

namespace torchprof::inject {

namespace {

constexpr uint64_t kMinSegmentBytes = 16 << 10;  // room for the longest string record and then some
constexpr uint64_t kHugeBufferBytes = uint64_t{8} << 20;

Segment* place_segment(void* at, uint64_t bytes) {
  auto* s = new (at) Segment();
  s->slots = (bytes - Segment::kHeaderBytes) / wire::kSlotSize;
  s->map_bytes = bytes;
  return s;
}

Segment* take_spare(ThreadBuffer* tb) {
  for (std::atomic<Segment*>& spare : tb->spares) {
    if (spare.load(std::memory_order_relaxed) == nullptr) continue;
    if (Segment* s = spare.exchange(nullptr, std::memory_order_acquire)) return s;
  }
  return nullptr;
}

// The segment the producer moves to: a spare, else one it maps itself.
Segment* next_segment(ThreadBuffer* tb) {
  if (Segment* s = take_spare(tb)) return s;
  if (tb->map_failed) return nullptr;  // no syscall per event while the system refuses
  wire::BufferRefusal why = wire::BufferRefusal::kCap;
  Segment* s = map_segment(tb->segment_bytes, tb->huge_pages, &why);
  if (s != nullptr) {
    buffer_budget().count_producer_map();
    return s;
  }
  if (why == wire::BufferRefusal::kSystem) tb->map_failed = true;
  buffer_budget().note_loss(why, now_ns());
  return nullptr;
}

void move_to(ThreadBuffer* tb, Segment* s) {
  tb->map_failed = false;
  tb->stream.advance(s);
  tb->segments_taken.store(tb->segments_taken.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  tb->next_wake = tb->stream.producer_head() + tb->wake_every;
}

}  // namespace

Segment* map_segment(uint64_t bytes, bool huge_pages, wire::BufferRefusal* why) {
  if (!buffer_budget().take(bytes)) {
    *why = wire::BufferRefusal::kCap;
    return nullptr;
  }
  void* mem = map_shared_buffer(bytes, huge_pages);
  if (mem == nullptr) {
    buffer_budget().give(bytes);
    *why = wire::BufferRefusal::kSystem;
    return nullptr;
  }
  return place_segment(mem, bytes);
}

void unmap_segment(Segment* s) {
  if (s == nullptr) return;
  const uint64_t bytes = s->map_bytes;
  s->~Segment();
  unmap_shared_buffer(s, bytes);
  buffer_budget().give(bytes);
}

ThreadBuffer* create_thread_buffer(uint32_t buffer_kb, uint32_t tid, bool is_main, sem_t* wake, bool huge_pages) {
  const uint64_t want = uint64_t{buffer_kb} << 10;
  uint64_t configured = 2 * kMinSegmentBytes;
  while (configured * 2 <= want) configured *= 2;
  // Within the cap when it fits; else the least, whatever the cap, so that the thread's
  // events are counted (it grows once the others' memory comes back).
  uint64_t bytes = configured;
  if (!buffer_budget().take(bytes)) {
    bytes = 2 * kMinSegmentBytes;
    buffer_budget().take_anyway(bytes);
  }
  const bool huge = huge_pages && configured >= kHugeBufferBytes;
  const uint64_t half = bytes / 2;
  // The struct in the shared arena too: the collector reads its committed head there.
  uint64_t struct_bytes = 4096;
  while (struct_bytes < sizeof(ThreadBuffer)) struct_bytes *= 2;
  void* mem = arena().allocate(struct_bytes);
  if (mem == nullptr) {
    struct_bytes = 0;
    mem = aligned_alloc(64, (sizeof(ThreadBuffer) + 63) & ~size_t{63});
  }
  // Two segments, the halves of one block (of the arena, else private: map_shared_buffer
  // says which); each half is given back on its own.
  void* first = map_shared_buffer(bytes, huge && bytes >= kHugeBufferBytes);
  void* second = first == nullptr ? nullptr : static_cast<char*>(first) + half;
  if (mem == nullptr || first == nullptr) {
    if (struct_bytes != 0) {
      arena().release(mem, struct_bytes);
    } else {
      free(mem);
    }
    unmap_shared_buffer(first, bytes);
    buffer_budget().give(bytes);
    return nullptr;
  }
  auto* tb = new (mem) ThreadBuffer();
  tb->alloc_bytes = struct_bytes;
  tb->segment_bytes = configured / 2;
  tb->huge_pages = huge;
  if (!huge) {
    tb->first_block = first;
    tb->first_block_bytes = bytes;
  }
  tb->stream.init(place_segment(first, half));
  tb->spares[0].store(place_segment(second, half), std::memory_order_relaxed);
  tb->intern.init();
  tb->wake_every = tb->stream.write_segment()->slots / 2;
  tb->next_wake = tb->wake_every;
  tb->wake = wake;
  tb->tid = tid;
  tb->is_main = is_main;
  // Its slot also when its segments are private: its head is read, and what it held
  // unsent is counted as lost.
  if (struct_bytes != 0) {
    if (wire::arena::ThreadSlot* slot = arena().claim_slot(tid)) {
      slot->head_at = arena().offset_of(tb->stream.head_word());
      slot->dropped_at = arena().offset_of(&tb->dropped);
      slot->at[0] = arena_position(tb);
      slot->sending_seq = 0;
      slot->word.store(0, std::memory_order_relaxed);
      slot->state.store(wire::arena::kLive, std::memory_order_release);
      tb->arena_slot = slot;
    }
  }
  return tb;
}

void populate_first_block(ThreadBuffer* tb) {
  if (tb->first_block == nullptr) return;
  if (tb->segments_taken.load(std::memory_order_relaxed) != 0) {
    tb->first_block = nullptr;  // past its first segment: that one may have been handed back
    return;
  }
  if (tb->stream.consumer_head() < kPopulateAfterSlots) return;
#ifdef MADV_POPULATE_WRITE
  // Pages already written stay as they are; an older kernel says EINVAL, and nothing changes.
  madvise(tb->first_block, tb->first_block_bytes, MADV_POPULATE_WRITE);
#endif
  tb->first_block = nullptr;
}

wire::arena::Position arena_position(const ThreadBuffer* tb) {
  wire::arena::Position p{};
  // Past the segments read to their end: the flusher hands those back to be used again.
  const Segment* seg = tb->stream.read_segment();
  for (;;) {
    const Segment* next = seg->next.load(std::memory_order_acquire);
    if (next == nullptr || tb->stream.consumer_tail() < seg->end) break;
    seg = next;
  }
  p.segment = arena().offset_of(seg);
  p.pos = tb->stream.consumer_tail();
  p.drained = tb->drained;
  p.lost = tb->lost;
  p.next_seq = tb->seq;
  return p;
}

void destroy_thread_buffer(ThreadBuffer* tb) {
  if (tb == nullptr) return;
  arena().free_slot(tb->arena_slot);
  Segment* s = tb->stream.read_segment();
  while (s != nullptr) {
    Segment* next = s->next.load(std::memory_order_acquire);
    unmap_segment(s);
    s = next;
  }
  for (std::atomic<Segment*>& spare : tb->spares) unmap_segment(spare.exchange(nullptr, std::memory_order_acquire));
  tb->intern.release();
  const uint64_t struct_bytes = tb->alloc_bytes;
  tb->~ThreadBuffer();
  if (struct_bytes != 0) {
    arena().release(tb, struct_bytes);
  } else {
    free(tb);
  }
}

namespace {

// The copy of the slot's position that does not hold now.
uint32_t other_copy(const wire::arena::ThreadSlot* slot) {
  return (slot->word.load(std::memory_order_relaxed) & 1u) ^ 1u;
}

}  // namespace

void publish_arena_position(ThreadBuffer* tb) {
  wire::arena::ThreadSlot* slot = tb->arena_slot;
  if (slot == nullptr) return;
  const uint32_t next_copy = other_copy(slot);
  slot->at[next_copy] = arena_position(tb);
  slot->word.store(next_copy, std::memory_order_release);
}

uint32_t publish_arena_sending(ThreadBuffer* tb) {
  wire::arena::ThreadSlot* slot = tb->arena_slot;
  if (slot == nullptr) return 0;
  const uint32_t next_copy = other_copy(slot);
  slot->at[next_copy] = arena_position(tb);
  slot->at[next_copy].next_seq = tb->seq + 1;
  slot->sending_seq = tb->seq;
  slot->word.store((next_copy ^ 1u) | 2u, std::memory_order_release);
  return next_copy;
}

void publish_arena_sent(ThreadBuffer* tb, uint32_t next_copy) {
  wire::arena::ThreadSlot* slot = tb->arena_slot;
  if (slot == nullptr) return;
  slot->at[next_copy].lost = tb->lost;
  slot->word.store(next_copy, std::memory_order_release);
}

bool grow_thread_buffer(ThreadBuffer* tb, uint64_t slots) {
  if (slots > tb->segment_bytes / wire::kSlotSize - Segment::kHeaderBytes / wire::kSlotSize) return false;
  Segment* s = next_segment(tb);
  if (s == nullptr) return false;
  move_to(tb, s);
  sem_post(tb->wake);  // the flusher reads the segment just left and makes another ready
  return true;
}

bool move_to_spare(ThreadBuffer* tb) {
  Segment* s = take_spare(tb);
  if (s == nullptr) return false;
  move_to(tb, s);
  return true;
}

}  // namespace torchprof::inject
