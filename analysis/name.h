// Interned names: timeline events carry one of a few thousand distinct names
// (NVTX messages, API calls, kernels) millions of times. A Name is a pointer to the
// one shared copy of its text, so an event's name costs 8 bytes, copying it costs
// nothing, and two Names are equal exactly when their pointers are (which also
// makes them cheap hash keys). The pool lives as long as the process and is
// shared by every thread (interning takes a lock; reading never does).
#pragma once

#include <compare>
#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace torchprof {

class Name {
 public:
  Name() = default;  // the empty name
  Name(std::string_view text);  // NOLINT(google-explicit-constructor): reads like a string
  Name(const std::string& text) : Name(std::string_view(text)) {}  // NOLINT
  Name(const char* text) : Name(std::string_view(text)) {}         // NOLINT

  const std::string& str() const { return text_ != nullptr ? *text_ : empty_string(); }
  operator const std::string&() const { return str(); }       // NOLINT
  operator std::string_view() const { return str(); }         // NOLINT

  bool empty() const { return text_ == nullptr; }
  size_t size() const { return str().size(); }
  const char* c_str() const { return str().c_str(); }
  const char* data() const { return str().data(); }
  std::string::const_iterator begin() const { return str().begin(); }
  std::string::const_iterator end() const { return str().end(); }
  bool starts_with(std::string_view prefix) const { return str().starts_with(prefix); }
  bool ends_with(std::string_view suffix) const { return str().ends_with(suffix); }
  size_t find(std::string_view what, size_t pos = 0) const { return str().find(what, pos); }
  std::string substr(size_t pos, size_t n = std::string::npos) const { return str().substr(pos, n); }

  // Identity of the text: equal for equal texts, stable for the process's life.
  const void* id() const { return text_; }

  friend bool operator==(const Name& a, const Name& b) { return a.text_ == b.text_; }
  friend bool operator==(const Name& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const Name& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const Name& a, const char* b) { return a.str() == b; }
  friend std::strong_ordering operator<=>(const Name& a, const Name& b) { return a.str() <=> b.str(); }
  friend std::string operator+(const Name& a, const std::string& b) { return a.str() + b; }
  friend std::string operator+(const std::string& a, const Name& b) { return a + b.str(); }
  friend std::string operator+(const Name& a, const char* b) { return a.str() + b; }
  friend std::string operator+(const char* a, const Name& b) { return a + b.str(); }
  friend std::ostream& operator<<(std::ostream& out, const Name& n) { return out << n.str(); }

 private:
  static const std::string& empty_string();
  const std::string* text_ = nullptr;
};

}  // namespace torchprof

template <>
struct std::hash<torchprof::Name> {
  size_t operator()(const torchprof::Name& n) const noexcept { return std::hash<const void*>()(n.id()); }
};
