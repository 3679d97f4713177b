#include "inject/string_intern.h"

#include <sys/mman.h>

#include <cstddef>

namespace torchprof::inject {

namespace {

constexpr size_t kPageBytes = 4096;

}  // namespace

// One anonymous mapping for the table and the text (zero-filled, touched only as used):
// the thread's buffer that points here may live in the shared arena, where a leak
// checker that scans the heap would not look.
bool StringIntern::init() {
  const size_t bytes = (kEntries * sizeof(Entry) + kArenaBytes + kPageBytes - 1) & ~(kPageBytes - 1);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    entries_ = nullptr;
    arena_ = nullptr;
    return false;
  }
  entries_ = static_cast<Entry*>(p);
  arena_ = static_cast<char*>(p) + kEntries * sizeof(Entry);
  return true;
}

void StringIntern::release() {
  if (entries_ != nullptr) {
    munmap(entries_, (kEntries * sizeof(Entry) + kArenaBytes + kPageBytes - 1) & ~(kPageBytes - 1));
  }
  entries_ = nullptr;
  arena_ = nullptr;
}

uint32_t StringIntern::find(const char* s, uint32_t len, Probe* probe) const {
  probe->slot = kNoSlot;
  if (entries_ == nullptr) return kNotFound;
  uint64_t h = hash_bytes(s, len);
  probe->hash = h;
  for (uint32_t i = 0; i < kMaxProbe; ++i) {
    uint32_t idx = static_cast<uint32_t>(h + i) & (kEntries - 1);
    const Entry& e = entries_[idx];
    if (e.id == 0) {
      probe->slot = idx;
      return kNotFound;
    }
    if (e.hash == h && e.len == len && memcmp(arena_ + e.off, s, len) == 0) return e.id;
  }
  return kNotFound;
}

void StringIntern::insert(const Probe& probe, const char* s, uint32_t len, uint32_t id) {
  if (probe.slot == kNoSlot || entries_ == nullptr) return;
  if (len > kArenaBytes - arena_used_) return;  // arena full: the name stays uncached
  memcpy(arena_ + arena_used_, s, len);
  entries_[probe.slot] = Entry{probe.hash, id, len, arena_used_};
  arena_used_ += len;
}

}  // namespace torchprof::inject
