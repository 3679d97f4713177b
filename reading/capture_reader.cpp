#include "reading/capture_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/errors.h"
#include "common/wire/wire.h"

namespace torchprof {

namespace {

constexpr uint32_t kMaxChunkType = static_cast<uint32_t>(capture::ChunkType::kNote);

bool read_exact(std::FILE* f, void* data, size_t n) {
  return std::fread(data, 1, n, f) == n;
}

}  // namespace

CaptureReader::CaptureReader(const std::string& path) : path_(path) {
  file_.reset(std::fopen(path.c_str(), "rb"));
  if (!file_) {
    throw InputError("cannot open capture " + path + ": " + std::strerror(errno));
  }
  // Large reads: captures are read front to back, often hundreds of MB.
  std::setvbuf(file_.get(), nullptr, _IOFBF, 1 << 20);
  if (!read_exact(file_.get(), &header_, sizeof header_) ||
      std::memcmp(header_.magic, capture::kFileMagic, sizeof header_.magic) != 0) {
    throw InputError(path + ": not a torchprof capture");
  }
  if (header_.version < capture::kMinFileVersion || header_.version > capture::kFileVersion) {
    throw InputError(path + ": capture file version " + std::to_string(header_.version) +
                     " is not supported (this torchprof reads versions " +
                     std::to_string(capture::kMinFileVersion) + " to " +
                     std::to_string(capture::kFileVersion) + ")");
  }
  if (header_.wire_version < wire::kMinProtocolVersion || header_.wire_version > wire::kProtocolVersion) {
    throw InputError(path + ": capture holds wire protocol version " +
                     std::to_string(header_.wire_version) + ", this torchprof reads versions " +
                     std::to_string(wire::kMinProtocolVersion) + " to " +
                     std::to_string(wire::kProtocolVersion));
  }
  offset_ = sizeof header_;
  file_pos_ = offset_;
  struct stat st {};
  if (::fstat(::fileno(file_.get()), &st) == 0 && S_ISREG(st.st_mode)) {
    file_size_ = static_cast<uint64_t>(st.st_size);
  } else {
    throw InputError(path + ": not a regular file");
  }
}

void CaptureReader::stop(uint64_t offset, std::string reason) {
  done_ = true;
  truncated_ = true;
  truncated_at_ = offset;
  truncation_reason_ = std::move(reason);
}

void CaptureReader::note_damage(const CaptureDamage& d) {
  if (damage_count_ == 0) first_damage_at_ = d.offset;
  ++damage_count_;
  damaged_bytes_ += d.skipped;
  if (damage_.size() < kMaxDamageKept) damage_.push_back(d);
}

bool CaptureReader::read_at(uint64_t offset, void* data, size_t n) {
  if (file_pos_ != offset) {
    if (::fseeko(file_.get(), static_cast<off_t>(offset), SEEK_SET) != 0) {
      file_pos_ = ~uint64_t{0};
      return false;
    }
    file_pos_ = offset;
  }
  const size_t got = n == 0 ? 0 : std::fread(data, 1, n, file_.get());
  file_pos_ += got;
  return got == n;
}

bool CaptureReader::read_head_at(uint64_t offset, capture::MarkedHead& head) {
  return read_at(offset, &head, sizeof head);
}

bool CaptureReader::intact_head(const capture::MarkedHead& head) const {
  const capture::ChunkHeader& h = head.header;
  return head.mark.sync == capture::kChunkSync && head.mark.head_check == capture::head_check(h) && h.type != 0 &&
         h.type <= kMaxChunkType && h.size <= capture::kMaxChunkBody;
}

// The offset of the next chunk at or after `from` whose head is intact (or of a sync
// word too close to the end for a whole head: a torn last chunk), else the file's size.
uint64_t CaptureReader::resync(uint64_t from) {
  constexpr size_t kBlock = 1 << 16;
  constexpr size_t kSync = sizeof capture::kChunkSync;
  std::vector<uint8_t> block(kBlock);
  uint64_t pos = from;
  while (pos + kSync <= file_size_) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kBlock, file_size_ - pos));
    if (!read_at(pos, block.data(), want)) return file_size_;
    for (size_t i = 0; i + kSync <= want; ++i) {
      if (std::memcmp(block.data() + i, &capture::kChunkSync, kSync) != 0) continue;
      const uint64_t at = pos + i;
      if (file_size_ - at < sizeof(capture::MarkedHead)) return at;
      capture::MarkedHead head{};
      if (read_head_at(at, head) && intact_head(head)) return at;
    }
    if (want <= kSync) break;
    pos += want - (kSync - 1);  // a sync word across the block's end is found in the next
  }
  return file_size_;
}

// A chunk at `start` whose head failed its check but whose body, taken to end where the
// next intact chunk starts (`next`), matches the header's body check: the damage hit the
// mark or the size field, and the chunk is read whole.
bool CaptureReader::recover(uint64_t start, uint64_t next, Chunk& chunk) {
  constexpr uint64_t kHead = sizeof(capture::MarkedHead);
  if (next - start < kHead) return false;
  capture::MarkedHead head{};
  if (!read_head_at(start, head)) return false;
  const uint64_t size = next - start - kHead;
  const capture::ChunkHeader& h = head.header;
  if (size > capture::kMaxChunkBody || h.type == 0 || h.type > kMaxChunkType) return false;
  chunk.body.resize(size);
  if (!read_at(start + kHead, chunk.body.data(), size)) return false;
  if (capture::chunk_check(header_.version, chunk.body.data(), size) != h.check) return false;
  chunk.header = h;
  chunk.header.size = static_cast<uint32_t>(size);
  chunk.body_offset = start + kHead;
  chunk.damaged = false;
  note_damage({start, 0, h.type, h.conn});
  offset_ = next;
  return true;
}

bool CaptureReader::next(Chunk& chunk) {
  if (done_) return false;
  return header_.version >= capture::kFirstMarkedVersion ? next_marked(chunk) : next_unmarked(chunk);
}

bool CaptureReader::next_marked(Chunk& chunk) {
  constexpr uint64_t kHead = sizeof(capture::MarkedHead);
  for (;;) {
    const uint64_t start = offset_;
    if (start >= file_size_) {
      done_ = true;  // clean end between chunks
      return false;
    }
    if (file_size_ - start < kHead) {
      stop(start, "short chunk header");
      return false;
    }
    capture::MarkedHead head{};
    if (!read_head_at(start, head)) {
      stop(start, "read error");
      return false;
    }
    if (!intact_head(head)) {
      const uint64_t next = resync(start + 1);
      if (recover(start, next, chunk)) return true;
      note_damage({start, next - start, 0, 0});
      offset_ = next;
      continue;
    }
    const capture::ChunkHeader& h = head.header;
    const uint64_t body_at = start + kHead;
    if (h.size > file_size_ - body_at) {
      stop(start, "short chunk body");
      return false;
    }
    chunk.header = h;
    chunk.body_offset = body_at;
    chunk.body.resize(h.size);
    if (!read_at(body_at, chunk.body.data(), h.size)) {
      stop(start, "read error");
      return false;
    }
    offset_ = body_at + h.size;
    chunk.damaged = capture::chunk_check(header_.version, chunk.body.data(), h.size) != h.check;
    if (!chunk.damaged) return true;
    note_damage({start, kHead + h.size, h.type, h.conn});
    if (keep_damaged_) return true;
  }
}

// Versions 1 and 2: no marks to find the next chunk by, so reading stops at damage.
bool CaptureReader::next_unmarked(Chunk& chunk) {
  const uint64_t start = offset_;
  capture::ChunkHeader h{};
  if (start >= file_size_) {
    done_ = true;
    return false;
  }
  if (file_size_ - start < sizeof h) {
    stop(start, "short chunk header");
    return false;
  }
  if (!read_at(start, &h, sizeof h)) {
    stop(start, "read error");
    return false;
  }
  const auto rest = [&] {
    note_damage({start, file_size_ - start, 0, 0});
    done_ = true;
    return false;
  };
  if (h.type == 0 || h.type > kMaxChunkType || h.size > capture::kMaxChunkBody) return rest();
  if (h.size > file_size_ - start - sizeof h) {
    stop(start, "short chunk body");
    return false;
  }
  chunk.header = h;
  chunk.body_offset = start + sizeof h;
  chunk.damaged = false;
  chunk.body.resize(h.size);
  if (!read_at(chunk.body_offset, chunk.body.data(), h.size)) {
    stop(start, "read error");
    return false;
  }
  if (capture::chunk_check(header_.version, chunk.body.data(), chunk.body.size()) != h.check) return rest();
  offset_ = chunk.body_offset + h.size;
  return true;
}

bool CaptureReader::read_body_at(uint64_t offset, uint32_t size, std::vector<uint8_t>& body) {
  body.resize(size);
  return read_at(offset, body.data(), size);
}

}  // namespace torchprof
