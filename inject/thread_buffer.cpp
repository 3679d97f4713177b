#include "inject/thread_buffer.h"

#include <cstdlib>
#include <new>

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
  void* mem = map_buffer_memory(bytes, huge_pages);
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
  unmap_buffer_memory(s, bytes);
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
  void* mem = aligned_alloc(64, (sizeof(ThreadBuffer) + 63) & ~size_t{63});
  void* storage = map_buffer_memory(bytes, huge && bytes >= kHugeBufferBytes);
  if (mem == nullptr || storage == nullptr) {
    free(mem);
    unmap_buffer_memory(storage, bytes);
    buffer_budget().give(bytes);
    return nullptr;
  }
  auto* tb = new (mem) ThreadBuffer();
  const uint64_t half = bytes / 2;
  tb->segment_bytes = configured / 2;
  tb->huge_pages = huge;
  tb->stream.init(place_segment(storage, half));
  tb->spares[0].store(place_segment(static_cast<char*>(storage) + half, half), std::memory_order_relaxed);
  tb->intern.init();
  tb->wake_every = tb->stream.write_segment()->slots / 2;
  tb->next_wake = tb->wake_every;
  tb->wake = wake;
  tb->tid = tid;
  tb->is_main = is_main;
  return tb;
}

void destroy_thread_buffer(ThreadBuffer* tb) {
  if (tb == nullptr) return;
  Segment* s = tb->stream.read_segment();
  while (s != nullptr) {
    Segment* next = s->next.load(std::memory_order_acquire);
    unmap_segment(s);
    s = next;
  }
  for (std::atomic<Segment*>& spare : tb->spares) unmap_segment(spare.exchange(nullptr, std::memory_order_acquire));
  tb->intern.release();
  tb->~ThreadBuffer();
  free(tb);
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
