// The first sweep of decoding (analysis/decode.cpp): the chunks of a capture file
// read in order for what they say about the run and its connections (identity, frame
// locations, goodbyes, run information), before any frame is decompressed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "reading/capture_reader.h"
#include "common/wire/wire.h"

namespace torchprof {

struct FrameRef {
  uint64_t offset = 0;
  uint32_t size = 0;
  uint32_t slots = 0;  // slots once decoded, from the frame's header (0: unusable header)
};

// What the first sweep learns about one connection (one process image).
struct ConnInput {
  uint32_t id = 0;
  wire::Hello hello{};
  std::string exe;
  std::vector<std::string> cmdline;
  std::string host;
  std::unordered_map<std::string, std::string> env;
  std::vector<FrameRef> frames;
  std::optional<wire::Bye> bye;
  bool closed = false;
  uint64_t damaged_frames = 0;  // frame chunks of this connection that failed their check
  bool damaged_bye = false;     // its Bye failed its check
};

// What the capture's run information chunks (kRunInfo, kRunEnd) and notes say.
struct RunInfo {
  std::vector<std::string> command;
  std::string host;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int exit_code = 0;
  std::vector<std::string> warnings;  // notes and what could not be read, in file order
  // Injection variables another tool held (nsys, ncu): variable, library, tool's name.
  struct OutsideTool {
    std::string variable;
    std::string library;
    std::string tool;
  };
  std::vector<OutsideTool> outside_tools;
};

struct ScanResult {
  RunInfo info;
  std::vector<std::unique_ptr<ConnInput>> conns;  // in order of their Hello
  bool saw_run_end = false;
  bool saw_exit_code = false;
  std::optional<int> end_signal;    // RunEnd: the signal the target died of
  std::optional<int> launcher_pid;  // RunInfo: the target's parent
  std::optional<int> target_pid;    // RunEnd: the target's pid
};

// Reads the whole file: run information and notes, one ConnInput per Hello.
ScanResult scan_capture(CaptureReader& reader);

// A record's timestamp (the image's CLOCK_MONOTONIC ns) in Unix-epoch ns. A damaged
// record's gives a wrong time, never undefined behaviour: wrapping arithmetic, then held
// within 2^52 ns (~52 days) of the Hello, so that durations and their sums stay far
// from int64 overflow.
inline int64_t record_epoch_ns(const wire::Hello& hello, uint64_t ts) {
  constexpr int64_t kMaxSpanNs = int64_t{1} << 52;
  const auto base = static_cast<int64_t>(hello.real_ns & (~uint64_t{0} >> 2));
  const auto t = static_cast<int64_t>(ts - hello.mono_ns + hello.real_ns);
  return t < base - kMaxSpanNs ? base - kMaxSpanNs : (t > base + kMaxSpanNs ? base + kMaxSpanNs : t);
}

}  // namespace torchprof
