// Everything one profiled thread owns: its stream of records, its intern table, NVTX
// nesting depths and its loss counters. Allocated at the thread's first event; after that
// the hot path touches only this memory.
//
// The stream is a chain of segments, each half of TORCHPROF_BUFFER_KB. A thread starts
// with two, the one it writes and a spare: while the flusher keeps up they take turns, as
// the two halves of one ring would. When the thread fills a segment before the flusher has
// read the other, it grows: it takes a spare the flusher has made ready (the flusher makes
// them ready for threads that fill theirs quickly, faulted in off the program's threads),
// else maps a new segment itself, within the process's cap (buffer_budget.h). Only past
// the cap, or when the system refuses memory, are records dropped (and counted). The
// flusher hands each segment it has read back as a spare, and gives back to the system
// what no thread needs any more.
#pragma once

#include <semaphore.h>

#include <atomic>
#include <cstdint>

#include "common/wire/wire.h"
#include "inject/segment_stream.h"
#include "inject/string_intern.h"

namespace torchprof::inject {

struct ThreadBuffer {
  // --- producer (the owning thread) ---
  SegmentStream stream;
  StringIntern intern;
  AddressCache addresses;      // in front of `intern` for C strings passed again
  uint64_t next_wake = 0;      // head position that wakes the flusher next
  uint64_t wake_every = 0;     // half a segment: slots between two wakes
  sem_t* wake = nullptr;       // the flusher's semaphore
  uint64_t last_ts = 0;        // the latest time stamped on this thread's records (recorder.cpp)
  static constexpr uint32_t kDepthSlots = 64;
  int32_t depth[kDepthSlots] = {};  // push/pop nesting per domain (id mod kDepthSlots)
  uint64_t unrecorded[kDepthSlots] = {};  // bit k: level k was pushed while paused (capture_control.h)
  char scratch[wire::kMaxStringBytes];  // UTF-8 of wide NVTX strings
  uint16_t ops_domain = 0;     // the "torchprof.ops" domain id once looked up (c_api.cpp)
  uint16_t modules_domain = 0; // the "torchprof.modules" domain id, likewise
  uint64_t segment_bytes = 0;  // every segment of this thread
  bool huge_pages = false;     // segments of 8 MiB or more are asked for 2 MiB pages
  bool map_failed = false;     // the system refused a segment: map none until a spare came

  // --- shared ---
  uint32_t tid = 0;
  bool is_main = false;
  std::atomic<bool> dead{false};        // thread exited; flusher frees after draining
  std::atomic<uint64_t> dropped{0};     // records refused for want of room
  // Segments ready for the producer: the flusher fills empty slots, the producer empties
  // full ones (each side with one atomic store or exchange: no lock, no ABA).
  static constexpr int kSpareSlots = 8;
  alignas(64) std::atomic<Segment*> spares[kSpareSlots] = {};
  std::atomic<uint64_t> segments_taken{0};  // the producer's moves to another segment

  // --- consumer (the flusher) ---
  uint64_t drained = 0;         // record heads taken out of the stream
  uint64_t lost = 0;            // of those, not delivered (send failed, no connection)
  uint64_t seen_dropped = 0;    // `dropped` as read at the last drain
  uint64_t reported_dropped = 0;
  uint64_t reported_emitted = 0;
  uint32_t seq = 0;             // next frame number on the current connection
  uint32_t conn_epoch = 0;      // connection that `seq` counts for
  uint64_t taken_seen = 0;      // segments_taken at the flusher's last look
  uint64_t head_seen = 0;       // the head then
  uint64_t busy_at_ns = 0;      // the last look that found it filling segments
  // The thread's first two segments, one block: faulted in by the flusher once the thread
  // has written enough to show it is a busy one (populate_first_block), so that the
  // program's thread does not take a page fault per 4 KiB as it writes them. Null once
  // done, once too late, or when the thread faults them in itself (2 MiB pages).
  void* first_block = nullptr;
  uint64_t first_block_bytes = 0;
  // Where the collector finds this stream after a kill (arena.h); nullptr when the buffer
  // is not in the shared arena.
  wire::arena::ThreadSlot* arena_slot = nullptr;
  uint64_t alloc_bytes = 0;     // what this struct's own memory took (arena block), 0: heap
};

// Faults the thread's first block in, writable, without writing to it (flusher only):
// once the thread has written kPopulateAfterSlots, and only while it still writes its
// first segment (both halves are its own then: neither has been handed back). A thread
// that writes a few records keeps the few pages it touched. MADV_POPULATE_WRITE, where
// the kernel has it (5.14); elsewhere the thread faults them in itself as before.
constexpr uint64_t kPopulateAfterSlots = 2048;  // 64 KiB: a thousand ops
void populate_first_block(ThreadBuffer* tb);

// The stream's position as the shared arena keeps it (wire/arena.h): where its unsent
// part begins once the flusher has read up to the consumer's tail.
wire::arena::Position arena_position(const ThreadBuffer* tb);
// Publishes arena_position() as the one that holds, no frame being sent (flusher only;
// before the segments read to their end are handed back).
void publish_arena_position(ThreadBuffer* tb);
// Around a frame that takes the stream up to the consumer's tail, numbered tb->seq:
// before it is sent, the position after it in the other copy, marked as being sent
// (returns that copy); once the send returned, that copy as the one that holds, with
// tb->lost as it then is.
uint32_t publish_arena_sending(ThreadBuffer* tb);
void publish_arena_sent(ThreadBuffer* tb, uint32_t next_copy);

// A buffer with two segments of half of about `buffer_kb` KiB (16 KiB at least) in one
// mapping, counted against buffer_budget(); at the cap, two of 16 KiB, whatever the cap
// (growth segments are still half of `buffer_kb`). nullptr when memory is short. With
// `huge_pages`, a buffer of 8 MiB or more is 2 MiB-aligned and asked for 2 MiB pages.
ThreadBuffer* create_thread_buffer(uint32_t buffer_kb, uint32_t tid, bool is_main, sem_t* wake,
                                   bool huge_pages = true);
// Unmaps every segment (the producer must be gone, or never write again).
void destroy_thread_buffer(ThreadBuffer* tb);

// The producer's slow path, when `slots` do not fit in its segment: moves to a spare or to
// a segment it maps itself within the cap, and wakes the flusher. False when there is none
// (the caller drops the unit and counts it; the refusal is noted in buffer_budget()).
bool grow_thread_buffer(ThreadBuffer* tb, uint64_t slots);
// The same without mapping a segment or noting a loss: moves to a spare when one is ready.
// For the stream the flusher writes itself (the GPU stream), which can wait.
bool move_to_spare(ThreadBuffer* tb);

// A segment of `bytes` (a power of two, 16 KiB or more) in memory of its own, counted
// against the cap (nullptr, with *why set, when the cap or the system refuses it).
Segment* map_segment(uint64_t bytes, bool huge_pages, wire::BufferRefusal* why);
// Unmaps it and gives its bytes back to the budget.
void unmap_segment(Segment* s);

}  // namespace torchprof::inject
