// Fuzz entry points shared by the libFuzzer binary (clang) and the corpus replayer
// (any compiler), so that CI exercises the same code with or without clang.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torchprof::fuzz {

// The first input byte picks what the rest is:
//   0  a whole capture file (capture reader, decoder, analysis)
//   1  one frame body as it comes off the wire (FrameHeader + zstd bytes)
//   2  raw 32-byte record slots, compressed here into a frame, so the fuzzer
//      explores the records rather than zstd
//   3  raw record slots as in 2, delta-encoded (common/wire/frame_codec.h) and
//      compressed into a kZstdDelta frame
//   4  a slot count (2 bytes, little-endian), then delta-transformed bytes,
//      compressed here into a kZstdDelta frame: the fuzzer explores the transform's
//      decoder rather than zstd
//   5  a byte stream sent to a running collector on one connection (the next byte:
//      bit 0 set = a valid Hello goes first, so the rest reaches the frame handling),
//      while a well-behaved process sends on another; its Hello, frame and Bye must
//      all be recorded whatever the first one sent, and the capture is then decoded
// The frame modes wrap the bytes into a valid capture (header, Hello, Frame, Bye).
enum class Mode : uint8_t { kCapture = 0, kFrameBody = 1, kRawRecords = 2, kDeltaRecords = 3, kDeltaBytes = 4,
                            kSocketStream = 5 };

int run_one(const uint8_t* data, size_t size);

}  // namespace torchprof::fuzz
