// Sequential reader of capture.tprof (common/wire/capture_format.h).
//
// Files that are not captures at all throw InputError. A short tail is normal (the
// run was killed mid-write): next() stops there and truncated() says where, so
// everything before it can still be analysed. Damage is not a tail: in a file of
// version 3 on, a chunk that fails its checks is stepped over, the next intact chunk
// found by its ChunkMark, and corrupted() and damage() say what was skipped; a chunk
// whose header alone was hit (its body checks against where the next chunk starts) is
// read whole. Versions 1 and 2 have no marks: reading stops at the damage, which is
// reported as corruption when intact-looking bytes follow it and as truncation when
// the file ends inside the chunk.
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
  bool damaged = false;       // keep_damaged(): its header is intact, its body failed its check
};

// A stretch of the file that failed its checks.
struct CaptureDamage {
  uint64_t offset = 0;      // where the damaged chunk starts
  uint64_t skipped = 0;     // bytes not read as chunks (0: the chunk was read after all)
  uint32_t type = 0;        // the damaged chunk's type and connection when its header is
  uint32_t conn = 0;        // intact (0: unknown)
};

class CaptureReader {
 public:
  // Throws InputError when the file cannot be opened or is not a capture of a
  // version this build understands.
  explicit CaptureReader(const std::string& path);

  // Reads the next complete, intact chunk. Returns false at the end of the file or at
  // a short tail (then truncated() is true); steps over damage (version 3 on).
  bool next(Chunk& chunk);

  // With `keep`, next() also returns chunks whose header is intact but whose body failed
  // its check (Chunk::damaged), for what a caller can still use of them (a Hello's
  // identity). They are counted in damage() either way.
  void keep_damaged(bool keep) { keep_damaged_ = keep; }

  // Re-reads a body that next() already verified (decode scans the file first, then
  // reads each frame again without keeping them all in memory). Returns false on an
  // I/O error.
  bool read_body_at(uint64_t offset, uint32_t size, std::vector<uint8_t>& body);

  const capture::FileHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  bool truncated() const { return truncated_; }
  uint64_t truncated_at() const { return truncated_at_; }  // offset of the bad chunk
  const std::string& truncation_reason() const { return truncation_reason_; }

  // Damage met so far, in file order (the first kMaxDamageKept stretches; the counts
  // cover all of them).
  bool corrupted() const { return damage_count_ > 0; }
  uint64_t damage_count() const { return damage_count_; }     // damaged chunks or stretches
  uint64_t damaged_bytes() const { return damaged_bytes_; }   // bytes skipped because of them
  uint64_t first_damage_at() const { return first_damage_at_; }
  const std::vector<CaptureDamage>& damage() const { return damage_; }
  static constexpr size_t kMaxDamageKept = 1000;

 private:
  void stop(uint64_t offset, std::string reason);
  void note_damage(const CaptureDamage& d);
  bool read_at(uint64_t offset, void* data, size_t n);
  bool read_head_at(uint64_t offset, capture::MarkedHead& head);
  bool intact_head(const capture::MarkedHead& head) const;
  uint64_t resync(uint64_t from);
  bool recover(uint64_t start, uint64_t next, Chunk& chunk);
  bool next_marked(Chunk& chunk);
  bool next_unmarked(Chunk& chunk);

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
  uint64_t file_size_ = 0;
  uint64_t file_pos_ = 0;  // where the FILE stands (reads seek only when it must)
  bool keep_damaged_ = false;
  uint64_t damage_count_ = 0;
  uint64_t damaged_bytes_ = 0;
  uint64_t first_damage_at_ = 0;
  std::vector<CaptureDamage> damage_;
};

}  // namespace torchprof
