// Sequential reader of capture.tprof (common/wire/capture_format.h).
//
// Files that are not captures at all throw InputError. A short or damaged tail is
// normal (the run was killed mid-write): next() stops there and truncated() says
// where, so everything before it can still be analysed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/capture_format.h"

namespace torchprof {

struct Chunk {
  capture::ChunkHeader header{};
  uint64_t body_offset = 0;   // file offset of the body, for read_body_at()
  std::vector<uint8_t> body;
};

class CaptureReader {
 public:
  // Throws InputError when the file cannot be opened or is not a capture of a
  // version this build understands.
  explicit CaptureReader(const std::string& path);

  // Reads the next complete, intact chunk. Returns false at the end of the file
  // or at the first short/damaged chunk (then truncated() is true).
  bool next(Chunk& chunk);

  // Re-reads a body that next() already verified (decode scans the file first, then
  // reads each frame again without keeping them all in memory). Returns false on an
  // I/O error.
  bool read_body_at(uint64_t offset, uint32_t size, std::vector<uint8_t>& body);

  const capture::FileHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  bool truncated() const { return truncated_; }
  uint64_t truncated_at() const { return truncated_at_; }  // offset of the bad chunk
  const std::string& truncation_reason() const { return truncation_reason_; }

 private:
  void stop(uint64_t offset, std::string reason);

  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::string path_;
  capture::FileHeader header_{};
  uint64_t offset_ = 0;
  bool done_ = false;
  bool truncated_ = false;
  uint64_t truncated_at_ = 0;
  std::string truncation_reason_;
};

}  // namespace torchprof
