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
// the same address (NVTX messages are mostly literals; torch's op names live in its
// operator schemas): remembers (address, text, id) of names up to kMaxLen bytes, so
// that a repeated name costs one comparison of its bytes instead of measuring, hashing
// and probing. The bytes are always compared, never trusted by address alone: a buffer
// reused for another name misses. Set-associative, kWays names per set, so that one
// address holding several names in turn (the heap block of a std::string that torch
// fills with a different autograd node's name at each call) keeps them all, and names
// whose addresses share a set do not push each other out. Fixed size.
class AddressCache {
 public:
  // "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad" (67) fits.
  static constexpr uint32_t kMaxLen = 95;

  // The id remembered for the NUL-terminated `s`, or 0.
  uint32_t find(const char* s) const {
    const Set& set = sets_[set_of(s)];
    for (uint32_t w = 0; w < kWays; ++w) {
      if (set.address[w] != s || set.id[w] == 0) continue;
      // Stops at the first difference or NUL: never reads past the end of `s`.
      if (strncmp(set.text[w], s, size_t{set.len[w]} + 1) == 0) return set.id[w];
    }
    return 0;
  }

  // `s` (at `address`, `len` bytes as strnlen measured them) is defined under `id` in
  // this stream. Takes the way after the one taken last in its set.
  void remember(const char* address, const char* s, uint32_t len, uint32_t id) {
    if (len > kMaxLen) return;
    Set& set = sets_[set_of(address)];
    const uint32_t w = set.next++ % kWays;
    set.address[w] = address;
    set.id[w] = id;
    set.len[w] = static_cast<uint8_t>(len);
    memcpy(set.text[w], s, len);
    set.text[w][len] = '\0';
  }

 private:
  // 8 ways: the SSO buffer of a std::string on torch's stack holds each autograd node's
  // name in turn (AddmmBackward0, TBackward0, ReluBackward0, ... at one address).
  static constexpr uint32_t kSets = 32;  // power of two
  static constexpr uint32_t kWays = 8;
  // The addresses of a set in its first cache line, then ids and lengths; the texts after.
  struct alignas(64) Set {
    const char* address[kWays];
    uint32_t id[kWays];  // 0 = empty
    uint8_t len[kWays];
    uint32_t next;
    char text[kWays][kMaxLen + 1];
  };
  static_assert(offsetof(Set, id) == 64, "a set's addresses fill its first cache line");
  static uint32_t set_of(const char* s) {
    const auto a = reinterpret_cast<uintptr_t>(s);
    return static_cast<uint32_t>((a ^ (a >> 6) ^ (a >> 12)) & (kSets - 1));
  }
  Set sets_[kSets] = {};
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
