// Appends chunks to DIR/capture.tprof (layout in common/wire/capture_format.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "common/safe_dir.h"
#include "common/wire/capture_format.h"

namespace torchprof {

// Each chunk (header + body) leaves in a single writev on an O_APPEND descriptor, so a
// run killed at any moment leaves complete chunks followed by at most one partial tail,
// which readers discard. Safe to call from several threads: the event loop appends
// frames while the launcher appends run-level chunks.
class CaptureWriter {
 public:
  static constexpr const char* kFileName = "capture.tprof";

  // Creates DIR/capture.tprof, which must not exist yet, and writes the file header;
  // inside `held` (DIR as the caller opened it) by name when given, never through a link.
  // Throws std::system_error when the file cannot be created.
  explicit CaptureWriter(const std::string& dir, const DirHandle& held = {});
  ~CaptureWriter();
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  // Returns false when the chunk was not written. After the first failed write every
  // later append is refused too: a chunk behind a damaged one would be unreachable.
  bool append(capture::ChunkType type, uint32_t conn, const void* body, size_t size);
  bool append_text(capture::ChunkType type, uint32_t conn, std::string_view text) {
    return append(type, conn, text.data(), text.size());
  }

  // Flushes to disk and closes; idempotent. Appends after close fail.
  void close();

  const std::string& path() const { return path_; }
  bool ok() const;
  std::string error() const;  // the first failure, "" when none
  uint64_t chunks_written() const;
  uint64_t bytes_written() const;

 private:
  bool write_all(const void* head, size_t head_size, const void* body, size_t body_size);
  void fail(std::string message);

  std::string path_;
  mutable std::mutex mutex_;
  int fd_ = -1;
  bool failed_ = false;
  std::string error_;
  uint64_t chunks_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace torchprof
