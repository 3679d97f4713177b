#include "formats/json_writer.h"

#include <charconv>
#include <cmath>

namespace torchprof::json {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], 0 when it is not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  if (len == 2 && c < 0xC2) return 0;                        // overlong
  if (len == 3 && c == 0xE0 && byte(i + 1) < 0xA0) return 0;  // overlong
  if (len == 3 && c == 0xED && byte(i + 1) >= 0xA0) return 0; // surrogate
  if (len == 4 && (c > 0xF4 || (c == 0xF0 && byte(i + 1) < 0x90) ||
                   (c == 0xF4 && byte(i + 1) >= 0x90))) {
    return 0;
  }
  return len;
}

// True when `s` can be written between quotes as it is.
bool plain(std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') return false;
  }
  return true;
}

}  // namespace

void append_string(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  if (plain(s)) {
    out += '"';
    out.append(s);
    out += '"';
    return;
  }
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t len = utf8_sequence(s, i);
      if (len == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD
        ++i;
      } else {
        out.append(s.substr(i, len));
        i += len;
      }
      continue;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
}

void Buffer::grow_to(size_t wanted) {
  size_t capacity = capacity_ == 0 ? 4096 : capacity_;
  while (capacity < wanted) capacity *= 2;
  auto data = std::make_unique_for_overwrite<char[]>(capacity);  // no zeroing: bytes are written before read
  if (size_ > 0) std::memcpy(data.get(), data_.get(), size_);
  data_ = std::move(data);
  capacity_ = capacity;
}

void append_string(Buffer& out, std::string_view s) {
  if (plain(s)) {
    char* p = out.reserve(s.size() + 2);
    *p++ = '"';
    std::memcpy(p, s.data(), s.size());
    p += s.size();
    *p++ = '"';
    out.commit(p);
    return;
  }
  std::string escaped;
  append_string(escaped, s);
  out += escaped;
}

void append_double(Buffer& out, double v) {
  std::string text;
  append_double(text, v);
  out += text;
}

void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace torchprof::json
