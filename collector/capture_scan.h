// The first sweep of decoding (collector/decode.cpp): the chunks of a capture file
// read in order for what they say about the run and its connections (identity, frame
// locations, goodbyes, run information), before any frame is decompressed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "collector/capture_reader.h"
#include "collector/model.h"
#include "formats/wire/wire.h"

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
};

struct ScanResult {
  std::vector<std::unique_ptr<ConnInput>> conns;  // in order of their Hello
  bool saw_run_end = false;
  bool saw_exit_code = false;
  std::optional<int> end_signal;    // RunEnd: the signal the target died of
  std::optional<int> launcher_pid;  // RunInfo: the target's parent
};

// Reads the whole file: run information and notes into `run`, one ConnInput per Hello.
ScanResult scan_capture(CaptureReader& reader, Run& run);

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

// What decoding one image could not use, counted; add_decode_warnings() words them.
struct DecodeLosses {
  uint64_t bad_frames = 0;
  uint64_t cut_records = 0;
  uint64_t lost_frames = 0;
  uint64_t unmatched_pops = 0;
  uint64_t pending_ends = 0;
  uint64_t unterminated = 0;
  uint64_t unknown_strings = 0;
};

// What an image's flusher said of the process's buffers (kBufferUsage, kBufferRefused).
struct BufferReport {
  uint64_t peak_bytes = 0;
  uint64_t cap_bytes = 0;
  int64_t refused_ns = 0;         // Unix-epoch ns of the first refusal that lost records; 0: none
  uint64_t refused_after_ns = 0;  // the same, from the image's first event (its Hello)
  uint16_t refusal = 0;           // wire::BufferRefusal
  uint64_t held_bytes = 0;        // what the buffers held then

  // Takes `r` when it is one of the two kinds (true), of the image whose Hello is `hello`.
  bool take(const wire::Record& r, const wire::Hello& hello);
  // Into the process's buffer fields (several images: the highest peak, the first refusal).
  void apply(Process& proc) const;
};

// Process::loss_note (and a warning saying it) from the buffer fields, once the process's
// dropped counts are known: why its events (or CUPTI's records) were lost, when the
// buffers are the reason.
void note_buffer_losses(Process& proc);

// The process's warnings about an image's losses, and about its missing goodbye.
void add_decode_warnings(const ConnInput& conn, const DecodeLosses& losses, Process& proc);

// The process's identity from its image's Hello and environment (rank, worker name, …).
void apply_identity(const ConnInput& conn, Process& proc);
// Exit code or signal from a Bye.
void apply_bye(const wire::Bye& bye, Process& proc);
// A target that died without a Bye (SIGKILL, OOM killer) still has the launcher's
// account of its end; without the launcher's account (no RunEnd), the run's exit code
// is the first process's.
void apply_launcher_view(Run& run, const ScanResult& scan);

}  // namespace torchprof
