#include "analysis/name.h"

#include <mutex>
#include <unordered_set>

namespace torchprof {

namespace {

struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>()(s); }
};

struct Pool {
  std::mutex mutex;
  // Node-based: an element never moves, so pointers to it stay valid.
  std::unordered_set<std::string, TextHash, std::equal_to<>> texts;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: Names may outlive static destructors
  return *p;
}

}  // namespace

Name::Name(std::string_view text) {
  if (text.empty()) return;
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.texts.find(text);
  if (it == p.texts.end()) it = p.texts.emplace(text).first;
  text_ = &*it;
}

const std::string& Name::empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

}  // namespace torchprof
