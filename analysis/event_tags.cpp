#include <array>
#include <functional>
#include <mutex>
#include <unordered_set>

#include "analysis/model.h"

namespace torchprof {

namespace {

struct TagsHash {
  size_t operator()(const EventTags& t) const noexcept {
    size_t h = std::hash<const void*>()(t.domain.id());
    h = h * 0x9E3779B97F4A7C15ull ^ std::hash<const void*>()(t.category_name.id());
    h = h * 0x9E3779B97F4A7C15ull ^ std::hash<const void*>()(t.op);
    h = h * 0x9E3779B97F4A7C15ull ^ t.category;
    h = h * 0x9E3779B97F4A7C15ull ^ t.end_tid;
    return h ^ (h >> 29);
  }
};

struct Pool {
  std::mutex mutex;
  // Node-based: an element never moves, so pointers to it stay valid.
  std::unordered_set<EventTags, TagsHash> sets;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: events may outlive static destructors
  return *p;
}

}  // namespace

const EventTags* EventTags::intern(const EventTags& tags) {
  if (tags.empty()) return nullptr;
  // Decoding sets the tags of event after event, mostly to a few sets: a small
  // direct-mapped cache per thread answers those without the pool's lock.
  struct Cached {
    const EventTags* tags = nullptr;
  };
  thread_local std::array<Cached, 64> cache{};
  const size_t h = TagsHash()(tags);
  Cached& c = cache[h & (cache.size() - 1)];
  if (c.tags != nullptr && *c.tags == tags) return c.tags;
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  c.tags = &*p.sets.insert(tags).first;
  return c.tags;
}

}  // namespace torchprof
