#include "collector/capture_writer.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "common/wire/wire.h"

namespace torchprof {
namespace {

uint64_t real_now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

CaptureWriter::CaptureWriter(const std::string& dir, const DirHandle& held) : path_(dir + "/" + kFileName) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW;
  fd_ = held.valid() ? ::openat(held.fd(), kFileName, kFlags, 0644) : ::open(path_.c_str(), kFlags, 0644);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot create " + path_);
  capture::FileHeader header{};
  std::memcpy(header.magic, capture::kFileMagic, sizeof(header.magic));
  header.version = capture::kFileVersion;
  header.wire_version = wire::kProtocolVersion;
  header.created_real_ns = real_now_ns();
  if (!write_all(&header, sizeof(header), nullptr, 0)) {
    const std::string reason = error_;
    ::close(fd_);
    fd_ = -1;
    throw std::system_error(EIO, std::generic_category(), reason);
  }
}

CaptureWriter::~CaptureWriter() { close(); }

bool CaptureWriter::append(capture::ChunkType type, uint32_t conn, const void* body,
                           size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0 || failed_) return false;
  if (size > capture::kMaxChunkBody) return false;  // refused, but the file stays usable
  capture::ChunkHeader header{};
  header.type = static_cast<uint32_t>(type);
  header.conn = conn;
  header.size = static_cast<uint32_t>(size);
  header.check = capture::chunk_check(capture::kFileVersion, body, size);
  const capture::MarkedHead head = capture::marked_head(header);
  if (!write_all(&head, sizeof(head), body, size)) return false;
  ++chunks_;
  return true;
}

// One writev carries the whole chunk. A short write (disk nearly full, a signal) is
// continued from where it stopped so the chunk stays contiguous; a hard error leaves
// a partial tail that readers discard, and stops further appends.
bool CaptureWriter::write_all(const void* head, size_t head_size, const void* body,
                              size_t body_size) {
  iovec parts[2] = {{const_cast<void*>(head), head_size},
                    {const_cast<void*>(body), body_size}};
  int count = body_size > 0 ? 2 : 1;
  iovec* next = parts;
  while (count > 0) {
    const ssize_t n = ::writev(fd_, next, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(std::string("write to ") + path_ + " failed: " + std::strerror(errno));
      return false;
    }
    bytes_ += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    while (count > 0 && left >= next->iov_len) {
      left -= next->iov_len;
      ++next;
      --count;
    }
    if (count > 0) {
      next->iov_base = static_cast<char*>(next->iov_base) + left;
      next->iov_len -= left;
    }
  }
  return true;
}

void CaptureWriter::fail(std::string message) {
  if (!failed_) error_ = std::move(message);
  failed_ = true;
}

void CaptureWriter::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return;
  // The capture is what `torchprof report` re-reads later; make it durable once.
  if (::fdatasync(fd_) != 0 && errno != EINVAL) {
    fail(std::string("sync of ") + path_ + " failed: " + std::strerror(errno));
  }
  ::close(fd_);
  fd_ = -1;
}

bool CaptureWriter::ok() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !failed_;
}

std::string CaptureWriter::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

uint64_t CaptureWriter::chunks_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return chunks_;
}

uint64_t CaptureWriter::bytes_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace torchprof
