#include "reading/capture_reader.h"

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
}

void CaptureReader::stop(uint64_t offset, std::string reason) {
  done_ = true;
  truncated_ = true;
  truncated_at_ = offset;
  truncation_reason_ = std::move(reason);
}

bool CaptureReader::next(Chunk& chunk) {
  if (done_) return false;
  const uint64_t start = offset_;
  capture::ChunkHeader h{};
  size_t got = std::fread(&h, 1, sizeof h, file_.get());
  if (got == 0 && std::feof(file_.get())) {
    done_ = true;  // clean end between chunks
    return false;
  }
  if (got != sizeof h) {
    stop(start, "short chunk header");
    return false;
  }
  if (h.type == 0 || h.type > kMaxChunkType || h.size > capture::kMaxChunkBody) {
    stop(start, "damaged chunk header");
    return false;
  }
  chunk.header = h;
  chunk.body_offset = start + sizeof h;
  chunk.body.resize(h.size);
  if (h.size > 0 && !read_exact(file_.get(), chunk.body.data(), h.size)) {
    stop(start, "short chunk body");
    return false;
  }
  if (capture::chunk_check(header_.version, chunk.body.data(), chunk.body.size()) != h.check) {
    stop(start, "chunk checksum mismatch");
    return false;
  }
  offset_ = chunk.body_offset + h.size;
  return true;
}

bool CaptureReader::read_body_at(uint64_t offset, uint32_t size, std::vector<uint8_t>& body) {
  body.resize(size);
  if (std::fseek(file_.get(), static_cast<long>(offset), SEEK_SET) != 0) return false;
  bool ok = size == 0 || read_exact(file_.get(), body.data(), size);
  // Leave the sequential position where next() expects it.
  std::fseek(file_.get(), static_cast<long>(offset_), SEEK_SET);
  return ok;
}

}  // namespace torchprof
