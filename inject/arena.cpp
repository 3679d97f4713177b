#include "inject/arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <ctime>

#include "inject/buffer_budget.h"

namespace torchprof::inject {

namespace {

constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kHugeBytes = uint64_t{2} << 20;
// Tries of the spin lock before a caller takes private memory instead.
constexpr int kLockTries = 4096;

// Room for everything the cap allows twice over (blocks are powers of two, and the
// free lists keep each size apart), never less than 128 MiB. Only the pages written
// take memory.
uint64_t arena_bytes() {
  const uint64_t cap = buffer_budget().cap();
  uint64_t bytes = 2 * cap + (uint64_t{64} << 20);
  if (bytes < (uint64_t{128} << 20)) bytes = uint64_t{128} << 20;
  if (bytes > (uint64_t{64} << 30)) bytes = uint64_t{64} << 30;
  return (bytes + kHugeBytes - 1) & ~(kHugeBytes - 1);
}

// The bracketed word of transparent_hugepage/shmem_enabled ("always [advise] never …").
bool shmem_takes_huge_pages() {
  const int fd = open("/sys/kernel/mm/transparent_hugepage/shmem_enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* open_bracket = strchr(buf, '[');
  if (open_bracket == nullptr) return false;
  return strncmp(open_bracket, "[always]", 8) == 0 || strncmp(open_bracket, "[within_size]", 13) == 0 ||
         strncmp(open_bracket, "[advise]", 8) == 0;
}

uint32_t class_of(uint64_t bytes, uint32_t min_shift) {
  uint32_t k = min_shift;
  while ((uint64_t{1} << k) < bytes) ++k;
  return k;
}

}  // namespace

bool Arena::ensure() {
  int s = state_.load(std::memory_order_acquire);
  if (s == kReady) return true;
  if (s == kFailed) return false;
  if (s == kNone && state_.compare_exchange_strong(s, kMaking, std::memory_order_acq_rel)) {
    const bool ok = make();
    state_.store(ok ? kReady : kFailed, std::memory_order_release);
    return ok;
  }
  // Another thread is making it: a few system calls.
  for (int i = 0; i < 1000000; ++i) {
    s = state_.load(std::memory_order_acquire);
    if (s == kReady) return true;
    if (s == kFailed) return false;
    if (s == kMaking) {
      timespec pause{0, 20000};
      nanosleep(&pause, nullptr);
    }
  }
  return false;
}

bool Arena::make() {
  const uint64_t bytes = arena_bytes();
  const int fd = memfd_create("torchprof-buffers", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return false;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return false;
  }
  // At a 2 MiB boundary, so that blocks aligned in the arena are aligned in memory (large
  // segments are asked for 2 MiB pages): a reservation a huge page larger, the memfd
  // mapped over it, the rest given back.
  void* p = MAP_FAILED;
  void* reserve = mmap(nullptr, bytes + kHugeBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserve != MAP_FAILED) {
    const auto start = reinterpret_cast<uintptr_t>(reserve);
    const uintptr_t aligned = (start + kHugeBytes - 1) & ~(uintptr_t{kHugeBytes} - 1);
    p = mmap(reinterpret_cast<void*>(aligned), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE | MAP_FIXED,
             fd, 0);
    if (p == MAP_FAILED) {
      munmap(reserve, bytes + kHugeBytes);
    } else {
      if (aligned > start) munmap(reserve, aligned - start);
      const uintptr_t tail = start + bytes + kHugeBytes - (aligned + bytes);
      if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    }
  }
  const uint64_t link_bytes = (bytes / kPageBytes * sizeof(uint64_t) + kPageBytes - 1) & ~(kPageBytes - 1);
  void* links = p == MAP_FAILED ? MAP_FAILED
                                : mmap(nullptr, link_bytes, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED || links == MAP_FAILED) {
    if (p != MAP_FAILED) munmap(p, bytes);
    close(fd);
    return false;
  }
  madvise(p, bytes, MADV_DONTFORK);  // a forked child writing here would corrupt the parent's records
  madvise(links, link_bytes, MADV_DONTFORK);
  // Well above the low numbers a program reuses without asking.
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, 900);
  fd_ = fd;
  if (high >= 0) {
    close(fd);
    fd_ = high;
  }
  base_ = static_cast<char*>(p);
  size_ = bytes;
  huge_pages_ = shmem_takes_huge_pages();
  links_ = static_cast<uint64_t*>(links);
  bump_ = wire::arena::kDataOffset;
  auto* h = reinterpret_cast<wire::arena::Header*>(base_);
  h->version = wire::arena::kVersion;
  h->max_threads = wire::arena::kMaxThreads;
  h->size = bytes;
  h->base = reinterpret_cast<uintptr_t>(base_);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = wire::arena::kMagic;
  return true;
}

bool Arena::lock() {
  for (int i = 0; i < kLockTries; ++i) {
    if (!lock_.exchange(true, std::memory_order_acquire)) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  return false;
}

void* Arena::allocate(uint64_t bytes) {
  if (!ensure()) return nullptr;
  const uint32_t k = class_of(bytes, kMinShift);
  if (k >= kClasses || !lock()) return nullptr;
  const uint64_t block = uint64_t{1} << k;
  uint64_t off = free_[k];
  if (off != 0) {
    free_[k] = links_[off / kPageBytes];
  } else {
    const uint64_t align = block < kHugeBytes ? block : kHugeBytes;
    const uint64_t at = (bump_ + align - 1) & ~(align - 1);
    if (at + block > size_) {
      unlock();
      return nullptr;
    }
    off = at;
    bump_ = at + block;
  }
  unlock();
  return base_ + off;
}

void Arena::release(void* p, uint64_t bytes) {
  const uint32_t k = class_of(bytes, kMinShift);
  const uint64_t off = offset_of(p);
  // Its memory goes back to the system now, as munmap would give it.
  madvise(p, uint64_t{1} << k, MADV_REMOVE);
  // Never fails for long: the holder does a few loads and stores.
  while (!lock()) {
  }
  links_[off / kPageBytes] = free_[k];
  free_[k] = off;
  unlock();
}

wire::arena::ThreadSlot* Arena::claim_slot(uint32_t tid) {
  if (!ready()) return nullptr;
  for (uint32_t i = 0; i < wire::arena::kMaxThreads; ++i) {
    auto* slot = reinterpret_cast<wire::arena::ThreadSlot*>(base_ + wire::arena::slot_offset(i));
    uint32_t expected = wire::arena::kFree;
    if (slot->state.load(std::memory_order_relaxed) != expected) continue;
    if (!slot->state.compare_exchange_strong(expected, wire::arena::kClaimed, std::memory_order_acquire)) continue;
    slot->tid = tid;
    return slot;
  }
  return nullptr;
}

void Arena::free_slot(wire::arena::ThreadSlot* slot) {
  if (slot == nullptr) return;
  slot->state.store(wire::arena::kFree, std::memory_order_release);
}

void Arena::forget_after_fork() {
  if (state_.load(std::memory_order_relaxed) == kReady && fd_ >= 0) close(fd_);
  fd_ = -1;
  base_ = nullptr;
  links_ = nullptr;
  size_ = 0;
  bump_ = 0;
  std::memset(free_, 0, sizeof free_);
  huge_pages_ = false;
  lock_.store(false, std::memory_order_relaxed);
  state_.store(kNone, std::memory_order_release);
}

Arena& arena() {
  static constinit Arena a;
  return a;
}

void* map_shared_buffer(size_t bytes, bool huge) {
  if (huge && !(arena().ensure() && arena().huge_pages())) return map_buffer_memory(bytes, huge);
  if (void* p = arena().allocate(bytes)) {
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);  // a hint, as for private memory
    return p;
  }
  return map_buffer_memory(bytes, huge);
}

void unmap_shared_buffer(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (arena().contains(p)) {
    arena().release(p, bytes);
  } else {
    unmap_buffer_memory(p, bytes);
  }
}

}  // namespace torchprof::inject
