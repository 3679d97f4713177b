// What the process's buffers may hold: every thread's segments and CUPTI's activity
// buffers count against one cap (TORCHPROF_BUFFER_LIMIT). Lock-free: the producers'
// growth (thread_buffer.cpp), the flusher and CUPTI's buffer callbacks take from it at once.
// Also the memory itself: anonymous mappings, so that what is given back is returned
// to the system at once (malloc would keep it, or serve it from the heap).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/wire/wire.h"

namespace torchprof::inject {

class BufferBudget {
 public:
  void set_cap(uint64_t bytes) { cap_.store(bytes, std::memory_order_relaxed); }
  uint64_t cap() const { return cap_.load(std::memory_order_relaxed); }
  uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }

  // Takes `bytes` when the buffers then hold no more than the cap.
  bool take(uint64_t bytes);
  // Takes `bytes` whatever the cap: a thread's first buffer, so that its events are counted.
  void take_anyway(uint64_t bytes);
  void give(uint64_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

  // A refusal that lost records: the first one is kept (when, why, bytes held then).
  struct Refusal {
    uint64_t ts = 0;  // 0: none yet
    wire::BufferRefusal why = wire::BufferRefusal::kCap;
    uint64_t held = 0;
  };
  void note_loss(wire::BufferRefusal why, uint64_t now_ns);
  Refusal first_loss() const;

  // Mappings a program thread made itself, none being ready for it (counted for the
  // figures: each is a syscall on a thread being profiled).
  void count_producer_map() { producer_maps_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t producer_maps() const { return producer_maps_.load(std::memory_order_relaxed); }

  // A forked child holds none of the parent's buffers (it never touches them).
  void reset_after_fork();
  // Forgets the first loss (unit tests, which share one budget).
  void forget_loss() { loss_ts_.store(0, std::memory_order_relaxed); }

 private:
  void raise_peak(uint64_t held);

  std::atomic<uint64_t> cap_{uint64_t{256} << 20};
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> peak_{0};
  std::atomic<uint64_t> loss_ts_{0};  // written once (0 -> ts), after the two below
  std::atomic<uint16_t> loss_why_{0};
  std::atomic<uint64_t> loss_held_{0};
  std::atomic<uint64_t> producer_maps_{0};
};

BufferBudget& buffer_budget();

// Anonymous read-write memory of `bytes` (a multiple of the page size), or nullptr. With
// `huge` (callers pass it for 8 MiB or more) it is 2 MiB-aligned and asked for 2 MiB pages.
void* map_buffer_memory(size_t bytes, bool huge);
void unmap_buffer_memory(void* p, size_t bytes);
// Writes every page of [p, p + bytes) once, so that whoever writes it next takes no fault.
void prefault(void* p, size_t bytes);

}  // namespace torchprof::inject
