#include "inject/string_intern.h"

#include <cstdlib>

namespace torchprof::inject {

bool StringIntern::init() {
  entries_ = static_cast<Entry*>(calloc(kEntries, sizeof(Entry)));
  arena_ = static_cast<char*>(malloc(kArenaBytes));
  if (entries_ == nullptr || arena_ == nullptr) {
    free(entries_);
    free(arena_);
    entries_ = nullptr;
    arena_ = nullptr;
    return false;
  }
  return true;
}

void StringIntern::release() {
  free(entries_);
  free(arena_);
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
