// wchar_t (UTF-32 on Linux) to UTF-8 for NVTX's W entry points; invalid code
// points become U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torchprof::inject {

// Writes at most `cap` bytes (no terminator) and returns the count; stops at the
// last whole character that fits.
inline size_t wide_to_utf8(const wchar_t* w, char* out, size_t cap) {
  size_t n = 0;
  for (; *w != 0; ++w) {
    uint32_t c = static_cast<uint32_t>(*w);
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
    size_t need = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    if (n + need > cap) break;
    if (need == 1) {
      out[n++] = static_cast<char>(c);
    } else if (need == 2) {
      out[n++] = static_cast<char>(0xC0 | (c >> 6));
      out[n++] = static_cast<char>(0x80 | (c & 0x3F));
    } else if (need == 3) {
      out[n++] = static_cast<char>(0xE0 | (c >> 12));
      out[n++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out[n++] = static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out[n++] = static_cast<char>(0xF0 | (c >> 18));
      out[n++] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out[n++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out[n++] = static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return n;
}

}  // namespace torchprof::inject
