// The flusher's segments. Those it has read to their end wait here to be handed out
// again as threads' spares; it makes spares ready for the threads that fill segments
// quickly (from here, else newly mapped and faulted in on the flusher's thread, so that
// the program's threads rarely map or fault themselves), takes back the extra ones of
// threads that have gone quiet, and unmaps what no thread needs. Flusher thread only.
#pragma once

#include <cstdint>

#include "inject/thread_buffer.h"

namespace torchprof::inject {

class SegmentPool {
 public:
  // A thread that writes little for this long keeps one spare only.
  static constexpr uint64_t kQuietNs = 200'000'000;
  // Spares beyond the first newly mapped for a thread hold at most this much: a thread
  // with large segments (TORCHPROF_BUFFER_KB of 16 MiB or more) gets more only from
  // segments kept here, already held and faulted in.
  static constexpr uint64_t kExtraSpareBytes = uint64_t{4} << 20;
  // Segments up to this size are faulted in when mapped here; larger ones (on 2 MiB pages,
  // a fault per 2 MiB) are faulted in by the thread as it writes them, as its first is.
  static constexpr uint64_t kPrefaultBytes = uint64_t{2} << 20;
  // Segments kept for reuse once every thread has what it needs (the rest is unmapped):
  // while some thread fills segments, kBusyKeep (what is unmapped now would be mapped and
  // faulted in again at once); once every thread has been quiet for kQuietNs, kKeep.
  static constexpr uint32_t kKeep = 4;
  static constexpr uint32_t kBusyKeep = 64;

  SegmentPool() = default;
  SegmentPool(const SegmentPool&) = delete;
  SegmentPool& operator=(const SegmentPool&) = delete;
  ~SegmentPool() { trim(0); }

  // A segment of `bytes`: one kept here, else a new mapping faulted in now, within the
  // cap; nullptr when the cap or the system refuses.
  Segment* take(uint64_t bytes, bool huge_pages);
  // Keeps `list` (linked through Segment::link) for reuse.
  void put_list(Segment* list);
  // Unmaps all but `keep` of the kept segments.
  void trim(uint32_t keep);
  // trim(kBusyKeep) or trim(kKeep), as the threads' last looks found them.
  void trim_for(uint64_t now_ns) { trim(now_ns - busy_at_ns_ < kQuietNs ? kBusyKeep : kKeep); }
  uint32_t size() const { return count_; }

  // One look at a live thread at `now_ns`: a thread that moved to other segments since the
  // last look (or wrote half a segment) gets a spare for the segment it fills next and two
  // more for each it filled since, up to ThreadBuffer::kSpareSlots (new mappings beyond
  // the first only up to kExtraSpareBytes);
  // one quiet for kQuietNs gives back all but one. Every thread keeps one: the other half
  // of its pair.
  void tend(ThreadBuffer* tb, uint64_t now_ns);

 private:
  static uint32_t armed(const ThreadBuffer* tb);
  // Fills empty slots up to `want` spares, mapping new segments while fewer than `mapped`
  // are armed (segments kept here first).
  void arm(ThreadBuffer* tb, uint32_t want, uint32_t mapped);
  Segment* take_kept(uint64_t bytes);
  void disarm(ThreadBuffer* tb, uint32_t keep);

  Segment* free_ = nullptr;  // linked through Segment::link
  uint32_t count_ = 0;
  uint64_t busy_at_ns_ = 0;  // the last look that found a thread filling segments
};

}  // namespace torchprof::inject
