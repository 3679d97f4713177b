// A thread's records as a chain of fixed-size segments, written by the thread that owns
// them (the producer, hot path: no locks, no syscalls) and read by the flusher (the
// consumer). Positions count slots over the stream's life and never wrap: head - tail is
// always the backlog. When a unit does not fit in the rest of its segment the producer
// moves on to another one (ThreadBuffer's growth, thread_buffer.h), leaving that rest
// unused, and the consumer hands each segment it has read to its end back to be used again.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/wire/arena.h"
#include "common/wire/wire.h"

namespace torchprof::inject {

// One segment: this header, then `slots` record slots, at the start of its own mapping
// (or its own part of one), so that a segment changes hands without an allocation.
struct Segment {
  static constexpr uint64_t kHeaderBytes = 64;

  std::atomic<Segment*> next{nullptr};  // set (release) when the producer moves on
  uint64_t base = 0;       // stream position of the first slot
  uint64_t end = 0;        // stream position past the last slot written; valid once `next` is set
  uint64_t slots = 0;      // room, in slots
  uint64_t map_bytes = 0;  // bytes of memory it stands for, this header included
  Segment* link = nullptr; // in a list of free or finished segments

  wire::Record* data() { return reinterpret_cast<wire::Record*>(reinterpret_cast<char*>(this) + kHeaderBytes); }
};
static_assert(sizeof(Segment) <= Segment::kHeaderBytes);
// The collector reads segments in the shared arena by these offsets.
static_assert(offsetof(Segment, next) == wire::arena::kSegmentNext);
static_assert(offsetof(Segment, base) == wire::arena::kSegmentBase);
static_assert(offsetof(Segment, end) == wire::arena::kSegmentEnd);
static_assert(offsetof(Segment, slots) == wire::arena::kSegmentSlots);
static_assert(Segment::kHeaderBytes == wire::arena::kSegmentHeaderBytes);
static_assert(sizeof(std::atomic<Segment*>) == 8 && std::atomic<Segment*>::is_always_lock_free);
static_assert(Segment::kHeaderBytes % wire::kSlotSize == 0);

class SegmentStream {
 public:
  // `first` is empty; it becomes both ends' segment.
  void init(Segment* first) {
    first->base = 0;
    first->next.store(nullptr, std::memory_order_relaxed);
    read_ = first;
    enter(first);
  }

  // --- producer ---
  // True when `n` slots fit in the current segment.
  bool has_room(uint64_t n) const { return limit_ - head_local_ >= n; }
  // The i-th slot after the last committed one (valid after has_room).
  wire::Record* slot(uint64_t i) const {
    return reinterpret_cast<wire::Record*>(biased_ + (head_local_ + i) * wire::kSlotSize);
  }
  // Publishes `n` written slots; returns the new head.
  uint64_t commit(uint64_t n) {
    head_local_ += n;
    head_.store(head_local_, std::memory_order_release);
    return head_local_;
  }
  uint64_t producer_head() const { return head_local_; }
  // Continues in `next` (empty, unlinked): what is left of the current segment stays unused.
  // The producer never touches the segment it leaves again.
  void advance(Segment* next) {
    Segment* old = write_;
    old->end = head_local_;
    next->base = head_local_;
    next->end = 0;
    next->next.store(nullptr, std::memory_order_relaxed);
    old->next.store(next, std::memory_order_release);
    enter(next);
  }
  // The segment being written (producer side only; also once the producer is gone).
  Segment* write_segment() const { return write_; }
  // For a stream whose producer is also its consumer (the flusher's GPU stream): once
  // everything is read, the segment being written starts over empty. False when unread
  // slots remain or older segments are still to be handed back (peek first).
  bool rewind() {
    if (tail_ != head_local_ || read_ != write_) return false;
    write_->base = head_local_;
    enter(write_);
    return true;
  }

  // --- consumer ---
  uint64_t consumer_head() const { return head_.load(std::memory_order_acquire); }
  // The committed head itself, for the collector to read in the shared arena.
  const std::atomic<uint64_t>* head_word() const { return &head_; }
  uint64_t consumer_tail() const { return tail_; }
  // The unread slots at the tail that lie in one segment, up to `head` (read first with
  // consumer_head()): *n of them from the pointer returned (0: nothing before `head`).
  // Segments read to their end are unlinked first and added to *finished (through `link`).
  const wire::Record* peek(uint64_t head, uint64_t* n, Segment** finished) {
    for (;;) {
      // `head` was read before `next`: a head past this segment means `next` is set.
      Segment* next = read_->next.load(std::memory_order_acquire);
      if (next != nullptr && tail_ >= read_->end) {
        read_->link = *finished;
        *finished = read_;
        read_ = next;
        continue;
      }
      uint64_t stop = next != nullptr && read_->end < head ? read_->end : head;
      *n = stop > tail_ ? stop - tail_ : 0;
      return read_->data() + (tail_ - read_->base);
    }
  }
  // Marks `n` slots at the tail (from the last peek) read.
  void consume(uint64_t n) { tail_ += n; }
  // The segment holding the tail: with write_segment(), the two ends of the chain.
  Segment* read_segment() const { return read_; }

 private:
  void enter(Segment* s) {
    write_ = s;
    limit_ = s->base + s->slots;
    biased_ = reinterpret_cast<uintptr_t>(s->data()) - s->base * wire::kSlotSize;  // wraps: positions map to addresses
  }

  // Producer-owned line.
  alignas(64) uint64_t head_local_ = 0;
  uint64_t limit_ = 0;      // stream position past the current segment's last slot
  uintptr_t biased_ = 0;    // address of stream position 0, were the current segment to start there
  Segment* write_ = nullptr;
  alignas(64) std::atomic<uint64_t> head_{0};
  // Consumer-owned line.
  alignas(64) uint64_t tail_ = 0;
  Segment* read_ = nullptr;
};

}  // namespace torchprof::inject
