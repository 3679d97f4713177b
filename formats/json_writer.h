// Small helpers for writing JSON text by hand: traces hold millions of events and
// a DOM (nlohmann) costs several times the output's size in memory and time.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace torchprof::json {

// Traces write tens of millions of these: the number helpers are inline, and
// strings that need no escaping (nearly all names) are copied in one piece.

// Appends `s` as a quoted JSON string. Control characters are escaped and bytes
// that are not valid UTF-8 become U+FFFD, so any name yields parseable output.
void append_string(std::string& out, std::string_view s);

inline void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

inline void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Writes a nanosecond count as microseconds with exactly three decimals ("12.345")
// at p, which has room for 32 characters; returns the end.
inline char* format_us(char* p, int64_t ns) {
  char* const start = p;
  // Negated as unsigned: INT64_MIN has no positive int64.
  uint64_t mag = static_cast<uint64_t>(ns);
  if (ns < 0) {
    *p++ = '-';
    mag = ~mag + 1;
  }
  p = std::to_chars(p, start + 24, mag / 1000).ptr;
  const auto frac = static_cast<unsigned>(mag % 1000);
  p[0] = '.';
  p[1] = static_cast<char>('0' + frac / 100);
  p[2] = static_cast<char>('0' + frac / 10 % 10);
  p[3] = static_cast<char>('0' + frac % 10);
  return p + 4;
}

// Appends a nanosecond count as microseconds with exactly three decimals ("12.345").
inline void append_us(std::string& out, int64_t ns) {
  char buf[32];
  out.append(buf, format_us(buf, ns));
}

void append_double(std::string& out, double v);  // shortest form that reads back exactly

// An output buffer for large documents (traces): the appends a std::string offers,
// without its per-append bookkeeping, and numbers formatted in place. Grows as needed;
// the owner hands view() on in large blocks and clear()s it.
class Buffer {
 public:
  explicit Buffer(size_t capacity = 1 << 16) {
    if (capacity > 0) grow_to(capacity);
  }
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer gone(std::move(other));
    swap(gone);
    return *this;
  }
  void swap(Buffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

  // Room for `n` more bytes: write up to n bytes at the pointer, then commit(end).
  char* reserve(size_t n) {
    if (capacity_ - size_ < n) grow_to(size_ + n);
    return data_.get() + size_;
  }
  void commit(char* end) { size_ = static_cast<size_t>(end - data_.get()); }

  void append(const char* s, size_t n) {
    char* p = reserve(n);
    std::memcpy(p, s, n);
    size_ += n;
  }
  Buffer& operator+=(std::string_view s) {
    append(s.data(), s.size());
    return *this;
  }
  Buffer& operator+=(const std::string& s) { return *this += std::string_view(s); }
  Buffer& operator+=(const char* s) { return *this += std::string_view(s); }
  Buffer& operator+=(char c) {
    *reserve(1) = c;
    ++size_;
    return *this;
  }

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  void clear() { size_ = 0; }
  std::string_view view() const { return {data_.get(), size_}; }

 private:
  void grow_to(size_t wanted);
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

void append_string(Buffer& out, std::string_view s);
void append_double(Buffer& out, double v);

// A count kept as decimal text and counted up in place: writing consecutive ids (a
// trace's External ids) costs a copy of their digits instead of a conversion each.
class DecimalCounter {
 public:
  explicit DecimalCounter(uint64_t start = 0) {
    std::memset(digits_, '0', sizeof digits_);
    char text[kDigits];
    auto r = std::to_chars(text, text + kDigits, start);
    const auto n = static_cast<size_t>(r.ptr - text);
    first_ = kDigits - n;
    std::memcpy(digits_ + first_, text, n);
  }
  // Adds one: the carry runs over the trailing nines.
  void increment() {
    size_t i = kDigits - 1;
    while (digits_[i] == '9') digits_[i--] = '0';
    ++digits_[i];
    if (i < first_) first_ = i;
  }
  std::string_view view() const { return {digits_ + first_, kDigits - first_}; }

 private:
  static constexpr size_t kDigits = 21;  // every uint64_t and one more digit for its carry
  char digits_[kDigits];
  size_t first_;
};

inline void append_int(Buffer& out, int64_t v) {
  char* p = out.reserve(24);
  out.commit(std::to_chars(p, p + 24, v).ptr);
}

inline void append_uint(Buffer& out, uint64_t v) {
  char* p = out.reserve(24);
  out.commit(std::to_chars(p, p + 24, v).ptr);
}

inline void append_us(Buffer& out, int64_t ns) { out.commit(format_us(out.reserve(32), ns)); }

// Copies `s` to `p` and returns the end: for writers that reserve() room for a whole
// record once and write its pieces in place.
inline char* put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

}  // namespace torchprof::json
