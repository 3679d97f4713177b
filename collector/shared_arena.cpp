#include "collector/shared_arena.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "common/wire/wire.h"

namespace torchprof {
namespace {

namespace arena = wire::arena;

// Slots per recovered frame at most, as the library's frames (1 MiB of slots).
constexpr uint64_t kFrameSlots = 32768;

template <typename T>
bool read_at(const char* map, uint64_t size, uint64_t off, T* out) {
  if (off > size || size - off < sizeof(T) || off % alignof(T) != 0) return false;
  std::memcpy(out, map + off, sizeof(T));
  return true;
}

struct SegmentView {
  uint64_t next = 0;  // the producer's address, 0: none
  uint64_t base = 0;
  uint64_t end = 0;
  uint64_t slots = 0;
};

bool read_segment(const char* map, uint64_t size, uint64_t off, SegmentView* s) {
  if (off < arena::kDataOffset || off % wire::kSlotSize != 0) return false;
  if (!read_at(map, size, off + arena::kSegmentNext, &s->next) || !read_at(map, size, off + arena::kSegmentBase, &s->base) ||
      !read_at(map, size, off + arena::kSegmentEnd, &s->end) || !read_at(map, size, off + arena::kSegmentSlots, &s->slots)) {
    return false;
  }
  if (off + arena::kSegmentHeaderBytes > size) return false;
  return s->slots <= (size - off - arena::kSegmentHeaderBytes) / wire::kSlotSize;
}

std::string frame_body(uint32_t tid, uint32_t seq, const std::vector<wire::Record>& slots, size_t begin, size_t count) {
  const size_t raw = count * sizeof(wire::Record);
  std::string body(sizeof(wire::FrameHeader) + ZSTD_compressBound(raw), '\0');
  const size_t packed = ZSTD_compress(body.data() + sizeof(wire::FrameHeader), body.size() - sizeof(wire::FrameHeader),
                                      slots.data() + begin, raw, /*compressionLevel=*/1);
  if (ZSTD_isError(packed)) return {};
  const wire::FrameHeader fh{tid, static_cast<uint32_t>(wire::FrameEncoding::kZstdRaw), static_cast<uint32_t>(raw),
                             seq};
  std::memcpy(body.data(), &fh, sizeof(fh));
  body.resize(sizeof(wire::FrameHeader) + packed);
  return body;
}

// One thread's unsent records, from `pos` in the segment at `seg` up to `head`; the
// heads read go to *heads, what could not be read to *unreadable.
void read_stream(const char* map, uint64_t size, uint64_t base_addr, uint64_t seg, uint64_t pos, uint64_t head,
                 std::vector<wire::Record>& out, uint64_t* heads, uint64_t* unreadable) {
  // Each step moves to a later segment: never more of them than fit.
  uint64_t steps = size / (arena::kSegmentHeaderBytes + wire::kSlotSize);
  while (pos < head && steps-- > 0) {
    SegmentView s;
    if (!read_segment(map, size, seg, &s) || pos < s.base || pos - s.base > s.slots) break;
    uint64_t stop = head;
    if (s.next != 0 && s.end < stop) stop = s.end;
    if (stop - s.base > s.slots) stop = s.base + s.slots;
    const char* data = map + seg + arena::kSegmentHeaderBytes;
    while (pos < stop) {
      wire::Record r;
      std::memcpy(&r, data + (pos - s.base) * wire::kSlotSize, sizeof r);
      const uint64_t len = 1 + uint64_t{r.extra};
      if (len > stop - pos) break;  // a unit never crosses a segment's end: not one
      const size_t at = out.size();
      out.resize(at + len);
      std::memcpy(out.data() + at, data + (pos - s.base) * wire::kSlotSize, len * wire::kSlotSize);
      pos += len;
      ++*heads;
    }
    if (pos < stop || pos >= head) break;
    if (s.next == 0 || s.next < base_addr) break;
    const uint64_t next = s.next - base_addr;
    SegmentView n;
    if (!read_segment(map, size, next, &n) || n.base < pos) break;
    seg = next;
    pos = n.base;
  }
  if (pos < head) *unreadable += head - pos;
}

}  // namespace

SharedArena::~SharedArena() { close_map(); }

void SharedArena::close_map() {
  if (map_ != nullptr) munmap(map_, size_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

std::string SharedArena::open(int fd, const arena::ArenaInfo& info) {
  close_map();
  fd_ = fd;
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close_map();
    return "its shared buffers are not a memory file";
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    close_map();
    return "its shared buffers are not sealed against resizing";
  }
  if (info.version != arena::kVersion || info.slot_bytes != sizeof(arena::ThreadSlot) ||
      static_cast<uint64_t>(st.st_size) != info.size || info.size < arena::kDataOffset) {
    close_map();
    return "its shared buffers are of another layout";
  }
  void* p = mmap(nullptr, info.size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close_map();
    return std::string("cannot map its shared buffers: ") + std::strerror(errno);
  }
  map_ = static_cast<char*>(p);
  size_ = info.size;
  // The mapping holds the memory: the descriptor is not kept (a tree of many processes
  // would double the collector's descriptors).
  ::close(fd_);
  fd_ = -1;
  arena::Header h{};
  std::memcpy(&h, map_, sizeof h);
  if (h.magic != arena::kMagic || h.size != info.size || h.base != info.base) {
    close_map();
    return "its shared buffers do not say what its message said";
  }
  return "";
}

SharedArena::Recovery SharedArena::recover(const std::map<uint32_t, uint32_t>& next_seq, const FrameSink& sink) const {
  if (map_ == nullptr) return {};
  return recover_from(map_, size_, next_seq, sink);
}

SharedArena::Recovery SharedArena::recover_from(const char* map, uint64_t size,
                                                const std::map<uint32_t, uint32_t>& next_seq, const FrameSink& sink) {
  Recovery out;
  arena::Header h{};
  if (!read_at(map, size, 0, &h) || h.magic != arena::kMagic || h.size != size) return out;
  std::vector<wire::Record> slots;
  for (uint32_t i = 0; i < arena::kMaxThreads; ++i) {
    const uint64_t at = arena::slot_offset(i);
    if (at + sizeof(arena::ThreadSlot) > size) break;
    // Copied as bytes: the process is gone, nothing changes it now.
    uint32_t state = 0, tid = 0, word = 0, sending_seq = 0;
    uint64_t head_at = 0, dropped_at = 0;
    std::memcpy(&state, map + at + offsetof(arena::ThreadSlot, state), sizeof state);
    if (state != arena::kLive) continue;
    std::memcpy(&tid, map + at + offsetof(arena::ThreadSlot, tid), sizeof tid);
    std::memcpy(&head_at, map + at + offsetof(arena::ThreadSlot, head_at), sizeof head_at);
    std::memcpy(&dropped_at, map + at + offsetof(arena::ThreadSlot, dropped_at), sizeof dropped_at);
    std::memcpy(&word, map + at + offsetof(arena::ThreadSlot, word), sizeof word);
    std::memcpy(&sending_seq, map + at + offsetof(arena::ThreadSlot, sending_seq), sizeof sending_seq);
    const auto it = next_seq.find(tid);
    const uint32_t arrived = it == next_seq.end() ? 0 : it->second;
    uint32_t copy = word & 1u;
    // A frame was being sent: if it arrived, the position after it holds.
    if ((word & 2u) != 0 && arrived > sending_seq) copy ^= 1u;
    arena::Position p{};
    std::memcpy(&p, map + at + offsetof(arena::ThreadSlot, at) + copy * sizeof(arena::Position), sizeof p);
    uint64_t head = 0, dropped = 0;
    if (!read_at(map, size, head_at, &head) || !read_at(map, size, dropped_at, &dropped)) continue;
    if (head < p.pos || head - p.pos > size / wire::kSlotSize) continue;  // not a stream of this arena
    slots.clear();
    uint64_t heads = 0, unreadable = 0;
    read_stream(map, size, h.base, p.segment, p.pos, head, slots, &heads, &unreadable);
    if (heads == 0 && unreadable == 0) continue;
    const uint64_t last_ts = slots.empty() ? 0 : slots.back().ts;
    // Where this thread's records end: what was read here, then its totals (as the
    // library's last frame of a thread ends with them).
    wire::Record recovered{static_cast<uint8_t>(wire::Kind::kRecovered), 0, 0, 0, last_ts, heads, unreadable};
    wire::Record totals{static_cast<uint8_t>(wire::Kind::kDropped), 0, 0, 0, last_ts, dropped + p.lost,
                        p.drained + heads + dropped};
    uint32_t seq = std::max(arrived, p.next_seq);
    size_t begin = 0;
    // Frames end on whole units.
    while (begin < slots.size()) {
      size_t end = begin;
      while (end < slots.size()) {
        const size_t len = 1 + size_t{slots[end].extra};
        if (end > begin && end + len - begin > kFrameSlots) break;
        end += len;
      }
      const std::string body = frame_body(tid, seq++, slots, begin, end - begin);
      if (!body.empty()) {
        sink(body);
        ++out.frames;
      }
      begin = end;
    }
    std::vector<wire::Record> tail{recovered, totals};
    const std::string body = frame_body(tid, seq, tail, 0, tail.size());
    if (!body.empty()) {
      sink(body);
      ++out.frames;
    }
    ++out.threads;
    out.heads += heads;
    out.unreadable_slots += unreadable;
  }
  return out;
}

bool process_ended(int pid, int wait_ms) {
  if (pid <= 0) return false;
#ifdef SYS_pidfd_open
  const int pfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pfd < 0 && errno == ESRCH) return true;
  if (pfd >= 0) {
    pollfd p{pfd, POLLIN, 0};
    int r;
    do {
      r = poll(&p, 1, wait_ms);
    } while (r < 0 && errno == EINTR);
    ::close(pfd);
    return r > 0;
  }
#endif
  // No pidfd: the process's state in /proc, looked at until it ends or time is up.
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  for (int waited = 0;; waited += 5) {
    std::ifstream in(path);
    if (!in) return true;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close_paren = text.rfind(')');
    if (close_paren == std::string::npos || close_paren + 2 >= text.size()) return true;
    const char state = text[close_paren + 2];
    if (state == 'Z' || state == 'X') return true;
    if (waited >= wait_ms) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace torchprof
