#include "inject/registry.h"

#include <pthread.h>

#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "inject/recorder.h"

namespace torchprof::inject {
namespace {

using wire::Kind;
using wire::Record;

struct Item {
  Kind kind;          // kDomain, kString or kCategory
  uint16_t domain;
  uint32_t string_id;
  uint32_t category;
  std::string text;
};

struct Registry {
  std::vector<Item> items;
  std::unordered_map<std::string, uint16_t> domains;
  std::unordered_map<std::string, uint32_t> strings;  // key: domain id bytes + text
  uint16_t next_domain = 1;
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
Registry* g_registry = nullptr;  // never freed: used until the last exit handler

Registry* reg() {
  if (g_registry == nullptr) g_registry = new (std::nothrow) Registry();
  return g_registry;
}

Record follow_record(const Item& it) {
  if (it.kind == Kind::kDomain) {
    return Record{static_cast<uint8_t>(Kind::kDomain), 0, it.domain, it.string_id, 0, 0, 0};
  }
  return Record{static_cast<uint8_t>(Kind::kCategory), 0, it.domain, it.string_id, 0, it.category, 0};
}

void emit(ThreadBuffer* tb, const Item& it) {
  if (tb == nullptr) return;
  auto len = static_cast<uint32_t>(it.text.size());
  if (it.kind == Kind::kString) {
    record_string_def(tb, it.string_id, it.text.data(), len, nullptr);
    return;
  }
  Record follow = follow_record(it);
  if (it.string_id == 0) {
    record_plain(tb, follow);
  } else {
    record_string_def(tb, it.string_id, it.text.data(), len, &follow);
  }
}

class Lock {
 public:
  Lock() { pthread_mutex_lock(&g_mu); }
  ~Lock() { pthread_mutex_unlock(&g_mu); }
};

}  // namespace

uint16_t registry_domain(ThreadBuffer* tb, const char* name, uint32_t len) {
  Lock lock;
  Registry* reg_ptr = reg();
  if (reg_ptr == nullptr) return 0;
  Registry& r = *reg_ptr;
  std::string key = name != nullptr ? std::string(name, len) : std::string("\x01nameless", 9);
  auto found = r.domains.find(key);
  if (found != r.domains.end()) return found->second;
  if (r.next_domain == 0xFFFF) return 0;  // out of ids: record into the default domain
  uint16_t id = r.next_domain++;
  r.domains.emplace(key, id);
  Item it{Kind::kDomain, id, name != nullptr ? next_string_id() : 0, 0, name != nullptr ? key : std::string()};
  emit(tb, it);
  r.items.push_back(std::move(it));
  return id;
}

uint32_t registry_string(ThreadBuffer* tb, uint16_t domain, const char* text, uint32_t len) {
  if (text == nullptr) return 0;
  Lock lock;
  Registry* reg_ptr = reg();
  if (reg_ptr == nullptr) return 0;
  Registry& r = *reg_ptr;
  std::string key(reinterpret_cast<const char*>(&domain), sizeof(domain));
  key.append(text, len);
  auto found = r.strings.find(key);
  if (found != r.strings.end()) return found->second;
  uint32_t id = next_string_id();
  r.strings.emplace(std::move(key), id);
  Item it{Kind::kString, domain, id, 0, std::string(text, len)};
  emit(tb, it);
  r.items.push_back(std::move(it));
  return id;
}

void registry_category(ThreadBuffer* tb, uint16_t domain, uint32_t category, const char* name, uint32_t len) {
  if (name == nullptr) return;
  Lock lock;
  Registry* reg_ptr = reg();
  if (reg_ptr == nullptr) return;
  Registry& r = *reg_ptr;
  Item it{Kind::kCategory, domain, next_string_id(), category, std::string(name, len)};
  emit(tb, it);
  r.items.push_back(std::move(it));
}

void registry_reemit(ThreadBuffer* tb) {
  Lock lock;
  if (g_registry == nullptr) return;
  for (const Item& it : g_registry->items) emit(tb, it);
}

void registry_fork_prepare() { pthread_mutex_lock(&g_mu); }
void registry_fork_parent() { pthread_mutex_unlock(&g_mu); }
void registry_fork_child() { pthread_mutex_init(&g_mu, nullptr); }

}  // namespace torchprof::inject
