#include "inject/segment_pool.h"

#include <algorithm>

#include "inject/buffer_budget.h"

namespace torchprof::inject {

Segment* SegmentPool::take_kept(uint64_t bytes) {
  for (Segment** at = &free_; *at != nullptr; at = &(*at)->link) {
    Segment* s = *at;
    if (s->map_bytes != bytes) continue;
    *at = s->link;
    s->link = nullptr;
    --count_;
    return s;
  }
  return nullptr;
}

Segment* SegmentPool::take(uint64_t bytes, bool huge_pages) {
  if (Segment* s = take_kept(bytes)) return s;
  wire::BufferRefusal why;
  Segment* s = map_segment(bytes, huge_pages, &why);
  // Faulted in here, on the flusher's thread: the thread that writes it takes no fault
  // (the header's page already was).
  constexpr uint64_t kPage = 4096;
  if (s != nullptr && bytes <= kPrefaultBytes) prefault(reinterpret_cast<char*>(s) + kPage, bytes - kPage);
  return s;
}

void SegmentPool::put_list(Segment* list) {
  while (list != nullptr) {
    Segment* next = list->link;
    list->link = free_;
    free_ = list;
    ++count_;
    list = next;
  }
}

void SegmentPool::trim(uint32_t keep) {
  while (count_ > keep) {
    Segment* s = free_;
    free_ = s->link;
    --count_;
    unmap_segment(s);
  }
}

uint32_t SegmentPool::armed(const ThreadBuffer* tb) {
  uint32_t n = 0;
  for (const std::atomic<Segment*>& spare : tb->spares) n += spare.load(std::memory_order_relaxed) != nullptr;
  return n;
}

void SegmentPool::arm(ThreadBuffer* tb, uint32_t want, uint32_t mapped) {
  uint32_t have = armed(tb);
  for (std::atomic<Segment*>& spare : tb->spares) {
    if (have >= want) return;
    // Only this thread fills a slot; the producer only empties one: a slot seen empty
    // stays empty until filled here.
    if (spare.load(std::memory_order_relaxed) != nullptr) continue;
    Segment* s = take_kept(tb->segment_bytes);
    if (s == nullptr && have < mapped) s = take(tb->segment_bytes, tb->huge_pages);
    if (s == nullptr) return;  // at the cap: the program's thread will find out itself
    spare.store(s, std::memory_order_release);
    ++have;
  }
}

void SegmentPool::disarm(ThreadBuffer* tb, uint32_t keep) {
  uint32_t have = armed(tb);
  for (std::atomic<Segment*>& spare : tb->spares) {
    if (have <= keep) return;
    Segment* s = spare.exchange(nullptr, std::memory_order_acquire);
    if (s == nullptr) continue;
    s->link = nullptr;
    put_list(s);
    --have;
  }
}

void SegmentPool::tend(ThreadBuffer* tb, uint64_t now_ns) {
  const uint64_t taken = tb->segments_taken.load(std::memory_order_relaxed);
  const uint64_t head = tb->stream.consumer_head();
  const uint64_t crossed = taken - tb->taken_seen;
  const uint64_t moved = head - tb->head_seen;
  tb->taken_seen = taken;
  tb->head_seen = head;
  const uint64_t segment_slots = tb->segment_bytes / wire::kSlotSize;
  if (crossed > 0 || moved >= segment_slots / 2) {
    tb->busy_at_ns = now_ns;
    busy_at_ns_ = now_ns;
    // Two for each it filled since the last look: the flusher may not look again for a
    // while (on 2 cores it shares one with the program's other threads and the collector).
    const uint64_t extra = std::min<uint64_t>(2 * crossed, ThreadBuffer::kSpareSlots - 1);
    const uint64_t mapped_extra = std::min(extra, kExtraSpareBytes / tb->segment_bytes);
    arm(tb, static_cast<uint32_t>(1 + extra), static_cast<uint32_t>(1 + mapped_extra));
  } else if (now_ns - tb->busy_at_ns >= kQuietNs) {
    disarm(tb, 1);
    arm(tb, 1, 1);
  } else {
    arm(tb, 1, 1);
  }
}

}  // namespace torchprof::inject
