// A connection's frames read back from the capture and decoded, in order, by a thread
// of its own that works a few frames ahead of the caller: reading, decompressing and
// undoing the delta transform (a third of decoding an NVTX capture) overlap turning
// the records into events. Inline, on the caller's thread, where CPU time matters
// more than waiting: the streamed table's records are light to handle, and with the
// thread it took ~1.4x the CPU time (frames read on another core than the one that
// wrote them) for ~15% less wall time, and 3 MiB more memory.
#pragma once

#include <zstd.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "reading/capture_reader.h"
#include "reading/capture_scan.h"
#include "reading/frame_decode.h"
#include "common/wire/wire.h"

namespace torchprof {

class DecodedFrames {
 public:
  struct Frame {
    bool ok = false;  // false: unreadable or damaged (the caller counts it)
    wire::FrameHeader header{};
    std::vector<uint8_t> raw;  // the frame's slots (decode_frame)
  };

  enum class Mode {
    kAhead,   // a thread decodes ahead of the caller (from kThreadedFrames frames on)
    kInline,  // each frame is decoded by next(), on the caller's thread
  };
  // `reader` is used by this object alone until it is destroyed. Fewer than
  // kThreadedFrames frames are decoded inline whatever the mode.
  DecodedFrames(CaptureReader& reader, const std::vector<FrameRef>& frames, Mode mode = Mode::kAhead);
  ~DecodedFrames();  // stops the thread, wherever it is
  DecodedFrames(const DecodedFrames&) = delete;
  DecodedFrames& operator=(const DecodedFrames&) = delete;

  // The next frame in order, or nullptr after the last. It stays valid until the next
  // call, and the caller may take its `raw` (swapping in another vector: decoding resizes
  // whatever it finds there). Rethrows what decoding threw (memory exhausted).
  Frame* next();

  static constexpr size_t kAhead = 4;           // frames decoded but not yet handed out, at most
  static constexpr size_t kThreadedFrames = 4;  // from this many frames on, a thread decodes

 private:
  void decode(size_t k, Frame& into);
  void run();

  CaptureReader& reader_;
  const std::vector<FrameRef>& frames_;
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx_;
  FrameScratch scratch_;
  std::vector<uint8_t> body_;
  std::vector<Frame> ring_;
  size_t handed_ = 0;    // frames handed out by next()
  std::mutex mu_;
  std::condition_variable changed_;
  size_t decoded_ = 0;   // frames the thread has finished
  size_t released_ = 0;  // frames the caller is done with (all before the one it holds)
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace torchprof
