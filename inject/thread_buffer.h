// Everything one profiled thread owns: its ring of records, its intern table,
// NVTX nesting depths and its loss counters. Allocated once at the thread's
// first event; after that the hot path touches only this memory.
#pragma once

#include <semaphore.h>

#include <atomic>
#include <cstdint>

#include "formats/wire/wire.h"
#include "inject/ring_buffer.h"
#include "inject/string_intern.h"

namespace torchprof::inject {

struct ThreadBuffer {
  // --- producer (the owning thread) ---
  RingBuffer ring;
  StringIntern intern;
  AddressCache addresses;      // in front of `intern` for C strings passed again
  uint64_t next_wake = 0;      // head position that wakes the flusher next
  sem_t* wake = nullptr;       // the flusher's semaphore
  uint64_t last_ts = 0;        // the latest time stamped on this thread's records (recorder.cpp)
  static constexpr uint32_t kDepthSlots = 64;
  int32_t depth[kDepthSlots] = {};  // push/pop nesting per domain (id mod kDepthSlots)
  uint64_t unrecorded[kDepthSlots] = {};  // bit k: level k was pushed while paused (capture_control.h)
  char scratch[wire::kMaxStringBytes];  // UTF-8 of wide NVTX strings
  uint16_t ops_domain = 0;     // the "torchprof.ops" domain id once looked up (c_api.cpp)

  // --- shared ---
  uint32_t tid = 0;
  bool is_main = false;
  std::atomic<bool> dead{false};        // thread exited; flusher frees after draining
  std::atomic<uint64_t> dropped{0};     // records refused because the ring was full

  // --- consumer (the flusher) ---
  uint64_t drained = 0;         // record heads taken out of the ring
  uint64_t lost = 0;            // of those, not delivered (send failed, no connection)
  uint64_t seen_dropped = 0;    // `dropped` as read at the last drain
  uint64_t reported_dropped = 0;
  uint64_t reported_emitted = 0;
  uint32_t seq = 0;             // next frame number on the current connection
  uint32_t conn_epoch = 0;      // connection that `seq` counts for
};

// Allocates a buffer with a ring of about `buffer_kb` KiB; nullptr when memory is short.
// With `huge_pages`, a ring of 8 MiB or more is 2 MiB-aligned and asked for 2 MiB pages.
ThreadBuffer* create_thread_buffer(uint32_t buffer_kb, uint32_t tid, bool is_main, sem_t* wake,
                                   bool huge_pages = true);
void destroy_thread_buffer(ThreadBuffer* tb);

}  // namespace torchprof::inject
