// Per-thread table of names already defined in this thread's stream, so that a
// repeated name costs only its 4-byte id. Keyed by content (the same pointer may
// hold different text later); fixed size, preallocated at the thread's first
// event. When it is full, callers define the string again under a fresh id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace torchprof::inject {

inline uint64_t hash_bytes(const char* s, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
  }
  if (i < n) {
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
  }
  h ^= h >> 32;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

// In front of StringIntern for C strings that a program passes again and again from
// the same address (NVTX messages are mostly literals): remembers (address, text, id)
// of short names, so that a repeated name costs one comparison of its bytes instead
// of measuring, hashing and probing. The bytes are always compared, never trusted by
// address alone: a buffer reused for another name misses. Fixed size, direct-mapped.
class AddressCache {
 public:
  static constexpr uint32_t kMaxLen = 47;

  // The id remembered for the NUL-terminated `s`, or 0.
  uint32_t find(const char* s) const {
    const Entry& e = entries_[slot(s)];
    if (e.address != s || e.id == 0) return 0;
    // Stops at the first difference or NUL: never reads past the end of `s`.
    return strncmp(e.text, s, size_t{e.len} + 1) == 0 ? e.id : 0;
  }

  // `s` (at `address`, `len` bytes as strnlen measured them) is defined under `id` in
  // this stream.
  void remember(const char* address, const char* s, uint32_t len, uint32_t id) {
    if (len > kMaxLen) return;
    Entry& e = entries_[slot(address)];
    e.address = address;
    e.id = id;
    e.len = len;
    memcpy(e.text, s, len);
    e.text[len] = '\0';
  }

 private:
  static constexpr uint32_t kEntries = 64;  // power of two
  struct Entry {
    const char* address;
    uint32_t id;  // 0 = empty
    uint32_t len;
    char text[kMaxLen + 1];
  };
  static uint32_t slot(const char* s) {
    const auto a = reinterpret_cast<uintptr_t>(s);
    return static_cast<uint32_t>((a ^ (a >> 7)) & (kEntries - 1));
  }
  Entry entries_[kEntries] = {};
};

class StringIntern {
 public:
  static constexpr uint32_t kNotFound = 0;

  struct Probe {
    uint64_t hash = 0;
    uint32_t slot = kNoSlot;  // where to insert on a miss; kNoSlot when full
  };

  // Allocates the table and text arena; false when memory is short (then every
  // lookup misses and inserts are ignored, which stays correct).
  bool init();
  void release();

  // The id of `s` in this thread's stream, or kNotFound (filling `probe`).
  uint32_t find(const char* s, uint32_t len, Probe* probe) const;

  // Remembers `s` under `id` once its kString record has been written.
  void insert(const Probe& probe, const char* s, uint32_t len, uint32_t id);

 private:
  static constexpr uint32_t kNoSlot = 0xFFFFFFFFu;
  static constexpr uint32_t kEntries = 4096;    // power of two
  static constexpr uint32_t kMaxProbe = 16;
  static constexpr uint32_t kArenaBytes = 256u << 10;

  struct Entry {
    uint64_t hash;
    uint32_t id;    // 0 = empty
    uint32_t len;
    uint32_t off;   // into arena_
  };

  Entry* entries_ = nullptr;
  char* arena_ = nullptr;
  uint32_t arena_used_ = 0;
};

}  // namespace torchprof::inject
