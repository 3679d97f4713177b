// The shared buffer arena: a process's thread buffers and their segments live in one
// memfd that the process hands to the collector (MsgType::kArena, the descriptor in
// SCM_RIGHTS) right after the handshake. The collector maps it read-only and reads it
// only when the process died without its goodbye (SIGKILL, the OOM killer): what the
// threads had recorded and the flusher had not yet sent is then taken from there and
// written into the capture as ordinary frames.
//
//   offset 0                Header
//   offset kSlotsOffset     kMaxThreads ThreadSlots, one per live thread buffer
//   offset kDataOffset on   thread buffers and segments
//
// The memfd is sealed against shrinking and growing before it is sent, so the
// collector's mapping can never fault; every offset read from it is checked against
// the size before use, and nothing read is trusted beyond what can be checked.
//
// Each ThreadSlot says where the unsent part of one thread's stream begins. The flusher
// publishes the position after a frame (in the other of two copies) before sending it,
// and switches `word` to it once the send returned: one store moves it from "this
// position, a frame is being sent that ends at the other one" to "the other one".
// The collector knows which frames arrived, so it knows which copy holds.
//
// Segments are linked by `next` as the producer's addresses; the Header's `base` turns
// them into offsets.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace torchprof::wire::arena {

constexpr uint64_t kMagic = 0x31414e4552415054ull;  // "TPARENA1" in file order
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxThreads = 1024;

struct Header {
  uint64_t magic;
  uint32_t version;
  uint32_t max_threads;  // kMaxThreads
  uint64_t size;         // bytes of the memfd
  uint64_t base;         // its address in the process
};

// Where the unsent part of a stream begins.
struct Position {
  uint64_t segment;   // offset of the segment holding `pos`
  uint64_t pos;       // stream position of the first slot not sent
  uint64_t drained;   // record heads before `pos`
  uint64_t lost;      // of those, heads in frames that could not be sent
  uint32_t next_seq;  // the frame number the next frame gets
  uint32_t pad;
};

enum SlotState : uint32_t { kFree = 0, kClaimed = 1, kLive = 2 };

struct ThreadSlot {
  std::atomic<uint32_t> state;  // SlotState
  uint32_t tid;
  uint64_t head_at;     // offset of the stream's committed head (a uint64_t, release-stored)
  uint64_t dropped_at;  // offset of the thread's count of records refused for room
  // Bit 0: the copy of `at` that holds. Bit 1: a frame numbered `sending_seq` is being
  // sent; if it arrived, the other copy holds.
  std::atomic<uint32_t> word;
  uint32_t sending_seq;
  Position at[2];
};

// The Segment header at the start of every segment (inject/segment_stream.h).
constexpr size_t kSegmentNext = 0;    // the next segment's address, 0 while none
constexpr size_t kSegmentBase = 8;    // stream position of its first slot
constexpr size_t kSegmentEnd = 16;    // position past its last slot; valid once next is set
constexpr size_t kSegmentSlots = 24;  // its room in slots
constexpr size_t kSegmentHeaderBytes = 64;

constexpr uint64_t kSlotsOffset = 4096;
constexpr uint64_t kDataOffset = kSlotsOffset + ((kMaxThreads * 128 + 4095) / 4096) * 4096;

// Body of MsgType::kArena.
struct ArenaInfo {
  uint64_t size;          // bytes of the memfd
  uint64_t base;          // its address in the process
  uint32_t version;       // kVersion
  uint32_t slot_bytes;    // sizeof(ThreadSlot)
};

static_assert(sizeof(Header) == 32);
static_assert(sizeof(Position) == 40);
static_assert(sizeof(ThreadSlot) == 112);
static_assert(sizeof(ThreadSlot) <= 128);
static_assert(offsetof(ThreadSlot, word) == 24);
static_assert(offsetof(ThreadSlot, at) == 32);
static_assert(sizeof(ArenaInfo) == 24);
static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free);

// The slot of index i.
constexpr uint64_t slot_offset(uint32_t i) { return kSlotsOffset + uint64_t{i} * 128; }

}  // namespace torchprof::wire::arena
