// Turns the body of a Frame (wire.h: FrameHeader + payload) back into its 32-byte
// slots, whatever the frame's encoding: plain zstd (kZstdRaw, protocol 1) or zstd
// of the delta transform (kZstdDelta, common/wire/frame_codec.h). The collector
// stores frames as they arrive; this runs only when a capture is analysed.
#pragma once

#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/wire/wire.h"

namespace torchprof {

// Reusable buffers for decode_frame (one per decoding thread).
struct FrameScratch {
  std::vector<uint8_t> transformed;  // kZstdDelta: zstd's output, before the inverse transform
};

// Decodes `body` (FrameHeader first) into `raw` (resized to the header's raw_size).
// On failure returns false and says why in `why`; never reads or writes out of bounds.
bool decode_frame(const uint8_t* body, size_t size, ZSTD_DCtx* dctx, FrameScratch& scratch,
                  wire::FrameHeader& header, std::vector<uint8_t>& raw, std::string* why = nullptr);

static_assert(alignof(wire::Record) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__ && sizeof(wire::Record) == wire::kSlotSize);

// Calls fn(record, its continuation slots, their size in bytes) for each record of a
// decoded frame in order. Returns false when the frame ends inside a record (the
// records before it were visited).
template <typename Fn>
bool for_each_record(const std::vector<uint8_t>& raw, Fn&& fn) {
  const size_t n = raw.size() / wire::kSlotSize;
  size_t i = 0;
  while (i < n) {
    const uint8_t* slot = raw.data() + i * wire::kSlotSize;
    // Each record is read in place: a copy on the stack first cost a store and loads
    // that waited on it (store forwarding) every record. The slots of a vector's buffer
    // are aligned for a Record (operator new aligns to 16 bytes, a slot is 32).
    const auto& r = *reinterpret_cast<const wire::Record*>(slot);
    const size_t extra = r.extra;
    if (i + 1 + extra > n) return false;
    fn(r, slot + wire::kSlotSize, extra * wire::kSlotSize);
    i += 1 + extra;
  }
  return true;
}

}  // namespace torchprof
