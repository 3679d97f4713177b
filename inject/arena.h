// The process's shared buffer arena (common/wire/arena.h): one memfd, mapped shared,
// that holds every thread buffer and segment, so that the collector can read what a
// process recorded after it was killed. Made at the first thread buffer; handed to the
// collector by the connection after each handshake.
//
// Blocks are powers of two of 4 KiB or more, aligned to their size up to 2 MiB, taken
// from free lists per size or from the untouched end; a block given back has its pages
// returned to the system at once (MADV_REMOVE). A short spin lock guards the lists: a
// thread that cannot take it at once (or an arena that is full, or could not be made)
// gets private memory instead, which works as before but cannot be read after a kill.
//
// A forked child does not inherit the mapping (MADV_DONTFORK): it makes its own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/wire/arena.h"

namespace torchprof::inject {

class Arena {
 public:
  // Makes the arena when there is none yet (any thread; the first one makes it). False
  // when it cannot be made (no memfd, no memory): callers use private memory.
  bool ensure();
  bool ready() const { return state_.load(std::memory_order_acquire) == kReady; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  uintptr_t base() const { return reinterpret_cast<uintptr_t>(base_); }
  bool contains(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return ready() && a >= base() && a < base() + size_;
  }
  uint64_t offset_of(const void* p) const { return reinterpret_cast<uintptr_t>(p) - base(); }

  // A block of `bytes` (rounded up to a power of two, 4 KiB at least), or nullptr.
  void* allocate(uint64_t bytes);
  // Gives back a block from allocate() with the same `bytes`.
  void release(void* p, uint64_t bytes);

  // A slot for thread `tid`'s buffer, or nullptr when all are taken.
  wire::arena::ThreadSlot* claim_slot(uint32_t tid);
  void free_slot(wire::arena::ThreadSlot* slot);

  // In a forked child: the mapping is not there; forget it, close the descriptor.
  void forget_after_fork();

  // Whether the kernel gives shared memory 2 MiB pages when asked (transparent_hugepage/
  // shmem_enabled: always, within_size or advise), read when the arena is made.
  bool huge_pages() const { return huge_pages_; }

 private:
  enum State : int { kNone = 0, kMaking = 1, kReady = 2, kFailed = 3 };
  static constexpr uint32_t kMinShift = 12;
  static constexpr uint32_t kClasses = 40;

  bool make();
  bool lock();
  void unlock() { lock_.store(false, std::memory_order_release); }

  std::atomic<int> state_{kNone};
  std::atomic<bool> lock_{false};
  int fd_ = -1;
  char* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t bump_ = 0;                // offset of the untouched end
  uint64_t free_[kClasses] = {};     // offset of the first free block of 2^k bytes; 0: none
  uint64_t* links_ = nullptr;        // per 4 KiB page of the arena: the next free block's offset
  bool huge_pages_ = false;
};

Arena& arena();

// Memory for thread buffers and segments: from the arena when it can, else private
// (map_buffer_memory). `huge` as there: where the kernel gives shared memory no 2 MiB
// pages, a segment that asks for them is private (the speed of large rings is kept; what
// such a segment holds unsent is lost at a kill, and counted).
void* map_shared_buffer(size_t bytes, bool huge);
void unmap_shared_buffer(void* p, size_t bytes);

}  // namespace torchprof::inject
