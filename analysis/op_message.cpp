#include "analysis/op_message.h"

#include <array>
#include <charconv>
#include <unordered_map>

namespace torchprof {
namespace {

constexpr std::string_view kSeparator = ", ";
constexpr std::string_view kAssign = " = ";
constexpr std::array<std::string_view, 7> kKeys = {"seq", "op_id", "sizes", "input_op_ids", "stack", "flops",
                                                  "types"};
// Deeper nesting than a list of tensor lists is not something torch writes.
constexpr int kMaxDepth = 8;

// The key a field starting at `rest` (just after ", ") names, or -1.
int key_at(std::string_view rest) {
  for (size_t k = 0; k < kKeys.size(); ++k) {
    if (rest.starts_with(kKeys[k]) && rest.substr(kKeys[k].size()).starts_with(kAssign)) {
      return static_cast<int>(k);
    }
  }
  return -1;
}

// Where the first field begins (the ", " before it), or npos.
size_t first_field(std::string_view message) {
  for (size_t at = message.find(kSeparator); at != std::string_view::npos;
       at = message.find(kSeparator, at + 1)) {
    if (key_at(message.substr(at + kSeparator.size())) >= 0) return at;
  }
  return std::string_view::npos;
}

// A decimal integer up to the next ", " or the end; advances `text`.
template <typename T>
bool take_number(std::string_view& text, T* value) {
  const size_t end = std::min(text.find(kSeparator), text.size());
  const char* first = text.data();
  const char* last = text.data() + end;
  if (first == last) return false;
  auto [ptr, ec] = std::from_chars(first, last, *value);
  if (ec != std::errc() || ptr != last) return false;
  text.remove_prefix(end);
  return true;
}

// One list of `sizes`: "[" [item (", " item)*] "]", an item a decimal integer or a
// list. Strict, so that what is kept is valid JSON for the trace's "Input Dims".
bool take_shape_list(std::string_view& text, int depth) {
  if (depth > kMaxDepth || !text.starts_with('[')) return false;
  text.remove_prefix(1);
  if (text.starts_with(']')) {
    text.remove_prefix(1);
    return true;
  }
  for (;;) {
    if (text.starts_with('[')) {
      if (!take_shape_list(text, depth + 1)) return false;
    } else {
      size_t n = text.starts_with('-') ? 1 : 0;
      const size_t digits = n;
      while (n < text.size() && text[n] >= '0' && text[n] <= '9') ++n;
      if (n == digits || n - digits > 19) return false;
      text.remove_prefix(n);
    }
    if (text.starts_with(']')) {
      text.remove_prefix(1);
      return true;
    }
    if (!text.starts_with(kSeparator)) return false;
    text.remove_prefix(kSeparator.size());
  }
}

bool take_sizes(std::string_view& text, std::string* out) {
  const std::string_view start = text;
  if (!take_shape_list(text, 1)) return false;
  *out = std::string(start.substr(0, start.size() - text.size()));
  return true;
}

// A run of decimal digits (with a leading '-' when `signed_ok`); advances `text`.
bool take_digits(std::string_view& text, bool signed_ok) {
  size_t n = signed_ok && text.starts_with('-') ? 1 : 0;
  const size_t digits = n;
  while (n < text.size() && text[n] >= '0' && text[n] <= '9') ++n;
  if (n == digits || n - digits > 20) return false;
  text.remove_prefix(n);
  return true;
}

// input_op_ids: "[(op,output), ...]", as torch's inputOpIdsToStr writes it; an input
// that no op produced (a scalar, None, an undefined tensor) is "(0,-1)". Kept only as
// far as checking its shape.
bool take_input_op_ids(std::string_view& text) {
  if (!text.starts_with('[')) return false;
  text.remove_prefix(1);
  if (text.starts_with(']')) {
    text.remove_prefix(1);
    return true;
  }
  for (;;) {
    if (!text.starts_with('(')) return false;
    text.remove_prefix(1);
    if (!take_digits(text, false) || !text.starts_with(',')) return false;
    text.remove_prefix(1);
    if (!take_digits(text, true) || !text.starts_with(')')) return false;
    text.remove_prefix(1);
    if (text.starts_with(']')) {
      text.remove_prefix(1);
      return true;
    }
    if (!text.starts_with(kSeparator)) return false;
    text.remove_prefix(kSeparator.size());
  }
}

// types: "[" ["\"" name "\"" (", " "\"" name "\"")*] "]", as torch's dtypesToStr writes
// them; a name holds no quote, backslash, bracket or control character. Kept as written
// (it is JSON as it is).
bool take_types(std::string_view& text, std::string* out) {
  const std::string_view start = text;
  if (!text.starts_with('[')) return false;
  text.remove_prefix(1);
  if (!text.starts_with(']')) {
    for (;;) {
      if (!text.starts_with('"')) return false;
      text.remove_prefix(1);
      const size_t close = text.find('"');
      if (close == std::string_view::npos) return false;
      for (const char c : text.substr(0, close)) {
        if (c == '\\' || c == '[' || c == ']' || static_cast<unsigned char>(c) < 0x20) return false;
      }
      text.remove_prefix(close + 1);
      if (text.starts_with(']')) break;
      if (!text.starts_with(kSeparator)) return false;
      text.remove_prefix(kSeparator.size());
    }
  }
  text.remove_prefix(1);
  *out = std::string(start.substr(0, start.size() - text.size()));
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// The rest of the message: frames separated by ';', innermost first.
std::vector<std::string> split_stack(std::string_view text) {
  std::vector<std::string> frames;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t semi = text.find(';', start);
    const size_t stop = semi == std::string_view::npos ? text.size() : semi;
    std::string_view frame = trim(text.substr(start, stop - start));
    if (!frame.empty()) frames.emplace_back(frame);
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  return frames;
}

bool take_field(std::string_view& text, int key, OpInfo& op) {
  switch (key) {
    case 0:
      return take_number(text, &op.sequence);
    case 1:
      return take_number(text, &op.op_id);
    case 2:
      return take_sizes(text, &op.input_shapes);
    case 3:
      return take_input_op_ids(text);
    case 4:
      op.stack = split_stack(text);
      text = {};
      return true;
    case 5:
      return take_number(text, &op.flops);
    case 6:
      return take_types(text, &op.input_types);
  }
  return false;
}

}  // namespace

std::optional<OpInfo> parse_op_message(std::string_view message, bool require_fields) {
  OpInfo op;
  const size_t fields = first_field(message);
  if (fields == std::string_view::npos) {
    if (require_fields || message.empty()) return std::nullopt;
    op.name = std::string(message);
    return op;
  }
  if (fields == 0) return std::nullopt;
  op.name = std::string(message.substr(0, fields));
  std::string_view rest = message.substr(fields);
  unsigned seen = 0;
  while (!rest.empty()) {
    if (!rest.starts_with(kSeparator)) return std::nullopt;
    rest.remove_prefix(kSeparator.size());
    const int key = key_at(rest);
    if (key < 0 || (seen & (1u << key)) != 0) return std::nullopt;
    seen |= 1u << key;
    rest.remove_prefix(kKeys[key].size() + kAssign.size());
    if (!take_field(rest, key, op)) return std::nullopt;
  }
  return op;
}

std::optional<OpInfo> op_of_range(std::string_view message, std::string_view domain_name) {
  const bool ops_domain = domain_name == kPytorchOpsDomain;
  if (!ops_domain && !domain_name.empty()) return std::nullopt;  // emit_nvtx uses the default domain
  std::optional<OpInfo> op = parse_op_message(message, /*require_fields=*/!ops_domain);
  if (!op && ops_domain) {
    // Malformed but certainly an op: its raw message is its name.
    op.emplace();
    op->name = std::string(message);
  }
  return op;
}

}  // namespace torchprof
