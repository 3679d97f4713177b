// Bounded appends for the op observer's names with shapes and stacks (torch_shapes.cpp,
// torch_stack.cpp): each writes all of its text or nothing, and keeps one byte free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace torchprof::inject {

// Appends `text` of `n` bytes to `out` (holding `at` of `cap`); false when it does not fit.
inline bool put_text(char* out, size_t& at, size_t cap, const char* text, size_t n) {
  if (at + n >= cap) return false;
  memcpy(out + at, text, n);
  at += n;
  return true;
}

// Appends `v` in decimal.
inline bool put_int(char* out, size_t& at, size_t cap, int64_t v) {
  char digits[24];
  size_t n = 0;
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  do {
    digits[sizeof digits - 1 - n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) digits[sizeof digits - 1 - n++] = '-';
  return put_text(out, at, cap, digits + sizeof digits - n, n);
}

}  // namespace torchprof::inject
