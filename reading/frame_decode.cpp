#include "reading/frame_decode.h"

#include <cstring>

#include "common/wire/capture_format.h"
#include "common/wire/frame_codec.h"

namespace torchprof {

namespace {

bool fail(std::string* why, const char* text) {
  if (why != nullptr) *why = text;
  return false;
}

}  // namespace

bool decode_frame(const uint8_t* body, size_t size, ZSTD_DCtx* dctx, FrameScratch& scratch,
                  wire::FrameHeader& fh, std::vector<uint8_t>& raw, std::string* why) {
  if (size < sizeof fh) return fail(why, "frame shorter than its header");
  std::memcpy(&fh, body, sizeof fh);
  if (fh.raw_size % wire::kSlotSize != 0 || uint64_t{fh.raw_size} > uint64_t{capture::kMaxChunkBody}) {
    return fail(why, "frame size is not a whole number of slots within the limit");
  }
  const uint8_t* payload = body + sizeof fh;
  const size_t payload_size = size - sizeof fh;
  const auto slots = static_cast<uint32_t>(fh.raw_size / wire::kSlotSize);
  raw.resize(fh.raw_size);
  switch (static_cast<wire::FrameEncoding>(fh.encoding)) {
    case wire::FrameEncoding::kZstdRaw: {
      size_t got = ZSTD_decompressDCtx(dctx, raw.data(), raw.size(), payload, payload_size);
      if (ZSTD_isError(got) || got != fh.raw_size) return fail(why, "zstd could not decompress the frame");
      return true;
    }
    case wire::FrameEncoding::kZstdDelta: {
      // The transformed size is zstd's content size, bounded by the longest valid
      // encoding of this many slots.
      unsigned long long content = ZSTD_getFrameContentSize(payload, payload_size);
      if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ||
          content > wire::codec::max_encoded_size(slots)) {
        return fail(why, "zstd frame of a delta frame has no valid content size");
      }
      scratch.transformed.resize(static_cast<size_t>(content));
      size_t got = ZSTD_decompressDCtx(dctx, scratch.transformed.data(), scratch.transformed.size(), payload,
                                       payload_size);
      if (ZSTD_isError(got) || got != content) return fail(why, "zstd could not decompress the frame");
      wire::codec::DecodeStatus st =
          wire::codec::delta_decode(scratch.transformed.data(), got, raw.data(), slots);
      if (st != wire::codec::DecodeStatus::kOk) return fail(why, wire::codec::status_text(st));
      return true;
    }
  }
  return fail(why, "unknown frame encoding");
}

}  // namespace torchprof
