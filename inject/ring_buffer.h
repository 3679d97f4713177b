// Single-producer single-consumer ring of 32-byte slots. The producer is the
// thread that owns it (hot path: no locks, no syscalls), the consumer the
// flusher. Capacity is a power of two; positions grow without wrapping and are
// masked on access, so head - tail is always the number of used slots.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "formats/wire/wire.h"

namespace torchprof::inject {

class RingBuffer {
 public:
  // `slots` must be a power of two; `storage` holds `slots` records and outlives us.
  void init(wire::Record* storage, uint64_t slots) {
    slots_ = storage;
    mask_ = slots - 1;
    capacity_ = slots;
  }

  uint64_t capacity() const { return capacity_; }
  wire::Record* storage() const { return slots_; }

  // Producer: true when `n` slots are free (refreshes the cached tail only when
  // the stale value says no, so the shared cache line is read rarely).
  bool has_room(uint64_t n) {
    if (capacity_ - (head_local_ - tail_cache_) >= n) return true;
    tail_cache_ = tail_.load(std::memory_order_acquire);
    return capacity_ - (head_local_ - tail_cache_) >= n;
  }

  // Producer: the i-th slot after the last committed one (valid after has_room).
  wire::Record* slot(uint64_t i) { return &slots_[(head_local_ + i) & mask_]; }

  // Producer: publishes `n` written slots; returns the new head.
  uint64_t commit(uint64_t n) {
    head_local_ += n;
    head_.store(head_local_, std::memory_order_release);
    return head_local_;
  }

  // Consumer side.
  uint64_t consumer_head() const { return head_.load(std::memory_order_acquire); }
  uint64_t consumer_tail() const { return tail_.load(std::memory_order_relaxed); }
  const wire::Record& at(uint64_t pos) const { return slots_[pos & mask_]; }
  void release_to(uint64_t pos) { tail_.store(pos, std::memory_order_release); }

 private:
  // Producer-owned line.
  alignas(64) uint64_t head_local_ = 0;
  uint64_t tail_cache_ = 0;
  wire::Record* slots_ = nullptr;
  uint64_t mask_ = 0;
  uint64_t capacity_ = 0;
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace torchprof::inject
